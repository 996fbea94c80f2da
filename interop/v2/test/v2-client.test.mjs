// @modelcontextprotocol/client 2.4.0 with the Tasks requester library
// @modelcontextprotocol/ext-tasks 0.2.2 (the pair MCP Inspector 2.12 is
// built on) against mcptaskd's demo tools, on both task wires: 2026-07-28
// (the modern era, the library's raw dispatch and v2 framing) and
// 2025-11-25 (the legacy initialize, a stateful session). Every flow goes
// through the library's public API (session.callTool, execution.settle /
// cancel / detach / serializeReference, session.resumeTask, session.task);
// the recorder in front of mcptaskd shows what the library sent.

import { describe, before, after, it } from 'node:test';
import assert from 'node:assert/strict';
import { TaskFailedError, JsonRpcResponseError } from '@modelcontextprotocol/ext-tasks/client';
import { connectV2, sortErrors, textOf, WIRE_2025, WIRE_2026 } from '../lib/v2client.mjs';
import { pollGapsChecked } from '../lib/recorder.mjs';
import {
  startServer, until, deferred, withDeadline,
  UNKNOWN_TASK, POLL_INTERVAL_MS, LONG, LONG_TEXT, LONG_STRUCTURED, ENDLESS, DEPLOY, DEPLOY_QUESTION, DEPLOY_DONE,
  DEPLOY_DECLINED, MIGRATION, MIGRATION_ERROR, MIGRATION_DATA, LINT, LINT_TEXT,
} from '../lib/harness.mjs';

const RELATED_TASK = 'io.modelcontextprotocol/related-task';
const TASK = { task: { preference: 'require' } };
// A Standard Schema that takes any JSON result: the v2 Client's request()
// wants one for a method outside its own schema (tasks/result).
const ANY = { '~standard': { version: 1, vendor: 'mcptask-interop', validate: (value) => ({ value }) } };

for (const wire of [WIRE_2026, WIRE_2025]) {
  describe(`v2 client + ext-tasks, ${wire}`, () => {
    let srv;
    before(async () => {
      srv = await startServer();
    });
    after(async () => {
      await srv?.stop();
    });

    // flow opens a connection, runs body, checks the library reported no
    // error of its own, and closes.
    const flow = (name, body) =>
      it(name, { timeout: 30_000 }, async (t) => {
        const c = await connectV2(srv.url, { wire });
        let failure;
        try {
          await body(c, t);
          const { abandoned, unexpected } = sortErrors(c, srv.rec.exchanges);
          if (abandoned.length) t.diagnostic(`${abandoned.length} answer(s) to a tasks/get poll the library abandoned (see sortErrors)`);
          assert.deepEqual(unexpected.map(String), [], 'the client or the library reported errors');
        } catch (e) {
          failure = e;
        }
        await c.close().catch((e) => (failure ??= e));
        if (failure) throw failure;
      });

    flow('connect: the era and the task capabilities the library sees', async (c) => {
      assert.equal(c.client.getProtocolEra(), wire === WIRE_2026 ? 'modern' : 'legacy');
      assert.equal(c.session.capabilities.execution, true);
      assert.equal(c.session.capabilities.cancellation, true);
      // 2026: tasks/update answers input; 2025: input goes as server requests.
      assert.equal(c.session.capabilities.inputResponses, wire === WIRE_2026);
    });

    flow('immediate call: echo answers at once, no task', async (c) => {
      const ex = await c.session.callTool('echo', { text: 'hi' });
      assert.equal(ex.kind, 'immediate');
      const { outcome } = await ex.settle();
      assert.equal(outcome.status, 'completed');
      assert.equal(textOf(outcome.result), 'hi');
      if (wire === WIRE_2026) assert.equal(outcome.result.resultType, 'complete');
    });

    flow('task to completion: status messages observed, result content and structuredContent', async (c, t) => {
      const ex = await c.session.callTool('long_computation', LONG, TASK);
      assert.equal(ex.kind, 'task');
      const events = [];
      const { outcome } = await ex.settle({ onEvent: (e) => events.push(e) });
      const messages = events.filter((e) => e.type === 'task').map((e) => e.task.statusMessage ?? '');
      t.diagnostic(`task events: ${events.map((e) => (e.type === 'task' ? `${e.task.status} "${e.task.statusMessage ?? ''}"` : `outcome ${e.outcome.status}`)).join(' | ')}`);
      assert.equal(outcome.status, 'completed', outcome.error?.message);
      assert.equal(textOf(outcome.result), LONG_TEXT);
      assert.deepEqual(outcome.result.structuredContent, LONG_STRUCTURED);
      assert.ok(!outcome.result.isError);
      if (wire === WIRE_2026) assert.equal(outcome.result.resultType, 'complete');
      else assert.deepEqual(outcome.result._meta?.[RELATED_TASK], { taskId: ex.handle.taskId });
      assert.ok(messages.some((m) => /^step [123] of 3: sieving/.test(m)), `no step message among: ${messages.join(' | ')}`);
      assert.equal(outcome.task?.status, 'completed');
      assert.equal(outcome.task?.statusMessage, 'done: 25 primes up to 100');
    });

    flow('poll interval honoured: every tasks/get at least pollInterval after the previous request', async (c, t) => {
      // Two long steps: on 2025 the library follows notifications/tasks/status
      // and polls only after a pollInterval without one, so the steps are
      // longer than the interval for polls to happen on both wires.
      const ex = await c.session.callTool('long_computation', { n: 1000, steps: 2, step_delay_ms: 1200 }, TASK);
      const { outcome } = await ex.settle();
      assert.equal(outcome.status, 'completed');
      const { rec, gaps, violations } = pollGapsChecked(srv.rec.exchanges, ex.handle.taskId);
      t.diagnostic(`${wire} poll gaps (ms, suggested): ${gaps.map((g) => `${g.gap}/${g.want}`).join(' ')}`);
      assert.ok(gaps.length >= 3, `too few polls: ${JSON.stringify(rec)}`);
      assert.equal(rec[0].pollInterval, POLL_INTERVAL_MS);
      assert.deepEqual(violations, [], 'polls came sooner than the server suggested');
      // Nor much later: the library polls at the suggested interval.
      assert.ok(gaps.every((g) => g.gap < g.want + 400), `gaps: ${JSON.stringify(gaps)}`);
    });

    flow('input accepted: the elicitation reaches the application, the task completes', async (c) => {
      c.elicit = () => ({ action: 'accept', content: { confirm: true } });
      const ex = await c.session.callTool('deploy_with_confirmation', DEPLOY, TASK);
      assert.equal(ex.kind, 'task');
      const events = [];
      const { outcome } = await withDeadline(ex.settle({ onEvent: (e) => events.push(e) }), 20_000, 'deploy (accepted)');
      assert.equal(outcome.status, 'completed', outcome.error?.message);
      assert.equal(textOf(outcome.result), DEPLOY_DONE);
      assert.deepEqual(outcome.result.structuredContent, { service: 'api', version: 'v2', deployed: true });
      assert.equal(c.elicitations.length, 1, 'asked once');
      const { request, context } = c.elicitations[0];
      assert.equal(request.kind, 'elicitation');
      assert.match(request.params.message, DEPLOY_QUESTION);
      assert.deepEqual(request.params.requestedSchema.required, ['confirm']);
      assert.equal(context.taskId, ex.handle.taskId);
      assert.equal(context.delivery, wire === WIRE_2026 ? 'task-update' : 'peer-request');
      assert.ok(events.some((e) => e.type === 'task' && e.task.status === 'input_required'), 'input_required was observed');
    });

    flow('input declined: the tool reports the decline, the task completes', async (c) => {
      c.elicit = () => ({ action: 'decline' });
      const ex = await c.session.callTool('deploy_with_confirmation', DEPLOY, TASK);
      const { outcome } = await withDeadline(ex.settle(), 20_000, 'deploy (declined)');
      assert.equal(outcome.status, 'completed', outcome.error?.message);
      assert.equal(textOf(outcome.result), DEPLOY_DECLINED);
      assert.deepEqual(outcome.result.structuredContent, { service: 'api', version: 'v2', deployed: false });
      assert.equal(c.elicitations.length, 1);
    });

    flow('cancel mid-way: execution.cancel() while working; the task is cancelled on the server', async (c) => {
      const ex = await c.session.callTool('long_computation', ENDLESS, TASK);
      const working = deferred();
      const settled = ex.settle({ onEvent: (e) => e.type === 'task' && /^step \d+ of 100/.test(e.task.statusMessage ?? '') && working.resolve() });
      await withDeadline(working.promise, 10_000, 'a step message');
      await ex.cancel();
      const { outcome } = await withDeadline(settled, 10_000, 'settle after cancel');
      assert.equal(outcome.status, 'cancelled');
      const sent = srv.rec.requests('tasks/cancel').filter((e) => e.sent.some((m) => m.params?.taskId === ex.handle.taskId));
      assert.equal(sent.length, 1, 'one tasks/cancel');
      const view = await c.session.task(ex.handle.taskId).snapshot();
      assert.equal(view.status, 'cancelled');
    });

    flow('resume from a new session and client by the task reference and by the bare task ID', async (c) => {
      const ex = await c.session.callTool('long_computation', { n: 1000, steps: 4, step_delay_ms: 150 }, TASK);
      const ref = ex.serializeReference();
      assert.deepEqual(ref, { endpointId: 'mcptaskd-interop', generation: wire === WIRE_2026 ? 'v2' : 'v1', taskId: ex.handle.taskId, originalOperation: 'tools/call' });
      const stored = JSON.stringify(ref); // what a host writes down
      const firstSession = c.transport.sessionId;
      await ex.detach();
      const c2 = await connectV2(srv.url, { wire });
      try {
        const resumed = await c2.session.resumeTask(JSON.parse(stored));
        const { outcome } = await resumed.settle();
        assert.equal(outcome.status, 'completed', outcome.error?.message);
        assert.equal(textOf(outcome.result), 'There are 168 primes up to 1000 (computed in 4 steps).');
        const byId = await c2.session.task(ex.handle.taskId).result();
        assert.equal(byId.status, 'completed');
        assert.deepEqual(byId.result.structuredContent, { n: 1000, primes: 168, steps: 4 });
      } finally {
        await c2.close();
      }
      if (wire === WIRE_2025) {
        // A new 2025 session followed the task: its requests carry the new session ID.
        assert.ok(firstSession);
        const ids = new Set(srv.rec.exchanges.filter((e) => e.sent.some((m) => m.params?.taskId === ex.handle.taskId)).map((e) => e.headers['mcp-session-id']));
        assert.ok(ids.size >= 1 && !ids.has(firstSession), `session IDs of the task's requests: ${[...ids]}, first session ${firstSession}`);
      }
    });

    flow('a session closed with an unfinished task: session.close() cancels it (tasks/cancel, not awaited)', async (c, t) => {
      const ex = await c.session.callTool('long_computation', ENDLESS, TASK);
      const id = ex.handle.taskId;
      await c.session.close();
      // The library's close() sends tasks/cancel for each execution it still
      // owns and does not wait for the answer: wait for it here, before the
      // transport closes, or the cancel may be lost (see the next flow).
      const cancel = await until(
        () => srv.rec.requests('tasks/cancel').find((e) => e.done && e.sent.some((m) => m.params?.taskId === id)),
        10_000,
        () => 'no tasks/cancel answered after session.close()',
      );
      const answer = cancel.received.map((r) => r.msg).find((m) => m.result || m.error);
      assert.ok(answer?.result, `tasks/cancel answer: ${JSON.stringify(answer)}`);
      // On 2026 the library reports its own poll, aborted by close(), to
      // onError (an AbortError); nothing else may be reported.
      c.errors = c.errors.filter((e) => e?.name !== 'AbortError');
      const c2 = await connectV2(srv.url, { wire });
      try {
        assert.equal((await c2.session.task(id).snapshot()).status, 'cancelled');
      } finally {
        await c2.close();
      }
    });

    flow('failed task: the tool\'s JSON-RPC error ends the execution failed', async (c) => {
      const ex = await c.session.callTool('flaky_migration', MIGRATION, TASK);
      assert.equal(ex.kind, 'task');
      const { outcome } = await ex.settle();
      assert.equal(outcome.status, 'failed');
      assert.ok(outcome.error instanceof TaskFailedError);
      assert.match(outcome.error.message, MIGRATION_ERROR);
      if (wire === WIRE_2026) {
        // The task's error object: code and data come through.
        assert.equal(outcome.error.code, -32603);
        assert.deepEqual(outcome.error.data, MIGRATION_DATA);
      } else {
        // 2025: the library reads the failure from tasks/get (statusMessage)
        // and never asks tasks/result, where the JSON-RPC error waits.
        assert.equal(outcome.error.code, undefined);
        assert.equal(srv.rec.requests('tasks/result').filter((e) => e.sent.some((m) => m.params?.taskId === ex.handle.taskId)).length, 0);
        const raw = await c.client.request({ method: 'tasks/result', params: { taskId: ex.handle.taskId } }, ANY).catch((e) => e);
        assert.equal(raw.code, -32603);
        assert.deepEqual(raw.data, MIGRATION_DATA);
      }
    });

    flow('isError result: the tool error\'s content reaches the application', async (c) => {
      const ex = await c.session.callTool('lint_report', LINT, TASK);
      const { outcome } = await ex.settle();
      if (wire === WIRE_2026) {
        // SEP-2663: a result with isError:true is a completed task.
        assert.equal(outcome.status, 'completed');
        assert.equal(outcome.result.isError, true);
        assert.match(textOf(outcome.result), LINT_TEXT);
        assert.equal(outcome.result.structuredContent.lines, 6);
      } else {
        // 2025-11-25 shows such a task failed; the library then reports a
        // TaskFailedError with the status message and does not fetch the
        // CallToolResult; tasks/result has it.
        assert.equal(outcome.status, 'failed');
        assert.equal(outcome.error.message, 'done: 3 problems in 6 lines');
        const raw = await c.client.request({ method: 'tasks/result', params: { taskId: ex.handle.taskId } }, ANY);
        assert.equal(raw.isError, true);
        assert.match(textOf(raw), LINT_TEXT);
      }
    });

    flow('unknown tool: -32602 from the call', async (c) => {
      await assert.rejects(c.session.callTool('no_such_tool', {}), (e) => {
        assert.ok(e instanceof JsonRpcResponseError, `${e?.constructor?.name}: ${e?.message}`);
        assert.equal(e.code, -32602);
        assert.match(e.message, /unknown tool "no_such_tool"/);
        return true;
      });
    });

    flow('unknown task: snapshot and result give -32602 "not found"', async (c) => {
      for (const op of [() => c.session.task(UNKNOWN_TASK).snapshot(), () => c.session.task(UNKNOWN_TASK).result()]) {
        await assert.rejects(op(), (e) => {
          assert.ok(e instanceof JsonRpcResponseError, `${e?.constructor?.name}: ${e?.message}`);
          assert.equal(e.code, -32602);
          assert.match(e.message, /not found/);
          return true;
        });
      }
    });
  });
}
