// MCP Inspector 2.12.0 in its scripted CLI mode (`mcp-inspector --cli`), a
// new process per command as a CI job runs it, against mcptaskd's demo
// tools on both eras it negotiates: `--protocol-era modern` (2026-07-28;
// the CLI declares the io.modelcontextprotocol/tasks extension, so
// mcptaskd makes every task-capable call a task, and the CLI follows it to
// its end through ext-tasks) and `--protocol-era legacy` (2025-11-25; the
// CLI adds params.task only for tools whose execution.taskSupport is
// "required"). What the CLI cannot do is asserted as such: it declares
// neither elicitation nor sampling, has no --cli method for tasks/get,
// tasks/result or tasks/cancel ("Unsupported method"), and an interrupted
// CLI cancels nothing.

import { describe, before, after, it } from 'node:test';
import assert from 'node:assert/strict';
import { runInspector, spawnInspector, callArgs } from '../lib/inspector.mjs';
import { connectV2, WIRE_2026, WIRE_2025 } from '../lib/v2client.mjs';
import { pollGapsChecked } from '../lib/recorder.mjs';
import {
  startServer, until, UNKNOWN_TASK, POLL_INTERVAL_MS, LONG, LONG_TEXT, LONG_STRUCTURED, ENDLESS, DEPLOY,
  MIGRATION, MIGRATION_ERROR, LINT, LINT_TEXT,
} from '../lib/harness.mjs';

const textOf = (r) => (r?.content ?? []).filter((c) => c.type === 'text').map((c) => c.text).join('\n');

/** the tools/call exchanges of the record since index from, with their task (if any). */
function callsSince(rec, from) {
  return rec.exchanges.slice(from).flatMap((e) =>
    e.sent
      .filter((m) => m.method === 'tools/call' && m.id !== undefined)
      .map((m) => {
        const r = e.received.map((x) => x.msg).find((x) => x.id === m.id)?.result;
        return { request: m, result: r, taskId: r?.resultType === 'task' ? r.taskId : r?.task?.taskId };
      }),
  );
}

/** the task answers (tasks/get results) of taskId in the record. */
function taskAnswers(rec, taskId) {
  return rec.exchanges.flatMap((e) =>
    e.sent
      .filter((m) => m.method === 'tasks/get' && m.params?.taskId === taskId)
      .map((m) => e.received.map((x) => x.msg).find((x) => x.id === m.id)?.result)
      .filter(Boolean),
  );
}

for (const [era, wire] of [['modern', WIRE_2026], ['legacy', WIRE_2025]]) {
  describe(`MCP Inspector 2.12.0 --cli, --protocol-era ${era} (${wire})`, () => {
    let srv;
    before(async () => {
      srv = await startServer();
    });
    after(async () => {
      await srv?.stop();
    });

    // cancelWithV2 cancels a task the CLI left behind, through the v2
    // client (the CLI cannot), and returns its status before the cancel.
    async function cancelWithV2(taskId) {
      const c = await connectV2(srv.url, { wire });
      try {
        const before = (await c.session.task(taskId).snapshot()).status;
        await c.session.task(taskId).cancel();
        return before;
      } finally {
        await c.close();
      }
    }

    it('immediate call: echo; the CLI declares the tasks extension, no elicitation, no sampling', { timeout: 30_000 }, async () => {
      const from = srv.rec.exchanges.length;
      const r = await runInspector(callArgs(srv.url, era, 'echo', { text: 'hi' }));
      assert.equal(r.code, 0, r.stderr);
      assert.equal(textOf(r.json.result), 'hi');
      if (era === 'modern') assert.equal(r.json.result.resultType, 'complete');
      const first = srv.rec.exchanges.slice(from).flatMap((e) => e.sent).find((m) => m.method === (era === 'modern' ? 'server/discover' : 'initialize'));
      const caps = era === 'modern' ? first.params._meta['io.modelcontextprotocol/clientCapabilities'] : first.params.capabilities;
      assert.deepEqual(caps.extensions?.['io.modelcontextprotocol/tasks'], {});
      assert.equal(caps.elicitation, undefined);
      assert.equal(caps.sampling, undefined);
      if (era === 'legacy') assert.equal(caps.tasks, undefined, 'no 2025 tasks capability');
    });

    if (era === 'modern') {
      it('task to completion: the CLI follows the task by tasks/get and prints its result', { timeout: 30_000 }, async () => {
        const from = srv.rec.exchanges.length;
        const r = await runInspector(callArgs(srv.url, era, 'long_computation', LONG));
        assert.equal(r.code, 0, r.stderr);
        assert.equal(textOf(r.json.result), LONG_TEXT);
        assert.deepEqual(r.json.result.structuredContent, LONG_STRUCTURED);
        const [call] = callsSince(srv.rec, from);
        assert.equal(call.result.resultType, 'task', 'mcptaskd answered with a task');
        const answers = taskAnswers(srv.rec, call.taskId);
        // The status messages reached the CLI (it does not print them).
        assert.ok(answers.some((a) => /^step [23] of 3/.test(a.statusMessage ?? '')), answers.map((a) => a.statusMessage).join(' | '));
        assert.equal(answers.at(-1).status, 'completed');
      });

      it('poll interval honoured: the gaps between its tasks/get', { timeout: 30_000 }, async (t) => {
        const from = srv.rec.exchanges.length;
        const r = await runInspector(callArgs(srv.url, era, 'long_computation', { n: 1000, steps: 5, step_delay_ms: 500 }));
        assert.equal(r.code, 0, r.stderr);
        const [call] = callsSince(srv.rec, from);
        const { gaps, violations } = pollGapsChecked(srv.rec.exchanges, call.taskId);
        t.diagnostic(`inspector modern poll gaps (ms, suggested): ${gaps.map((g) => `${g.gap}/${g.want}`).join(' ')}`);
        assert.ok(gaps.length >= 3);
        assert.equal(gaps[0].want, POLL_INTERVAL_MS);
        assert.deepEqual(violations, []);
      });

      it('failed task: exit 1, the tool\'s error message', { timeout: 30_000 }, async () => {
        const from = srv.rec.exchanges.length;
        const r = await runInspector(callArgs(srv.url, era, 'flaky_migration', { ...MIGRATION, step_delay_ms: 300 }));
        assert.equal(r.code, 1);
        assert.match(JSON.parse(r.stderr).error.message, MIGRATION_ERROR);
        const [call] = callsSince(srv.rec, from);
        assert.equal(taskAnswers(srv.rec, call.taskId).at(-1).status, 'failed');
      });

      it('an interrupted CLI (SIGINT) cancels nothing: the task goes on (2026 has no session to close)', { timeout: 30_000 }, async () => {
        const from = srv.rec.exchanges.length;
        const p = spawnInspector(callArgs(srv.url, era, 'long_computation', ENDLESS));
        const call = await until(() => {
          const [c] = callsSince(srv.rec, from);
          return c?.taskId && taskAnswers(srv.rec, c.taskId).length > 0 && c;
        }, 15_000, () => 'the CLI did not poll its task');
        p.child.kill('SIGINT');
        await p.exited;
        assert.equal(srv.rec.requests('tasks/cancel').filter((e) => e.sent.some((m) => m.params?.taskId === call.taskId)).length, 0);
        assert.equal(await cancelWithV2(call.taskId), 'working');
      });
    } else {
      it('task call: only a taskSupport "required" tool goes as a task; an optional one is a plain call', { timeout: 30_000 }, async () => {
        const from = srv.rec.exchanges.length;
        const r = await runInspector(callArgs(srv.url, era, 'long_computation', LONG, ['--task']));
        assert.equal(r.code, 0, r.stderr);
        assert.equal(textOf(r.json.result), LONG_TEXT);
        const [call] = callsSince(srv.rec, from);
        assert.equal(call.request.params.task, undefined, 'no params.task (--task is not a CLI option: ignored)');
        assert.equal(call.taskId, undefined);
      });

      it('failed: the plain call\'s JSON-RPC error, exit 1', { timeout: 30_000 }, async () => {
        const r = await runInspector(callArgs(srv.url, era, 'flaky_migration', MIGRATION));
        assert.equal(r.code, 1);
        assert.match(JSON.parse(r.stderr).error.message, MIGRATION_ERROR);
      });
    }

    it('input: cannot answer (no elicitation capability); the task stays input_required, the CLI waits', { timeout: 30_000 }, async (t) => {
      const from = srv.rec.exchanges.length;
      // deploy_with_confirmation is taskSupport "required": a task on both eras.
      const p = spawnInspector(callArgs(srv.url, era, 'deploy_with_confirmation', DEPLOY));
      const call = await until(() => {
        const [c] = callsSince(srv.rec, from);
        return c?.taskId && taskAnswers(srv.rec, c.taskId).some((a) => a.status === 'input_required') && c;
      }, 15_000, () => 'the CLI did not see its task input_required');
      if (era === 'legacy') assert.equal(typeof call.request.params.task, 'object', `params.task: ${JSON.stringify(call.request.params)}`);
      // mcptaskd asked nothing: the CLI declared no elicitation.
      const asked = srv.rec.exchanges.slice(from).some((e) => e.received.some((r) => r.msg.method === 'elicitation/create'));
      assert.equal(asked, false);
      const { gaps, violations } = pollGapsChecked(srv.rec.exchanges, call.taskId);
      t.diagnostic(`inspector ${era} poll gaps while input_required (ms, suggested): ${gaps.map((g) => `${g.gap}/${g.want}`).join(' ')}`);
      assert.deepEqual(violations, []);
      assert.equal(p.child.exitCode, null, 'the CLI is still waiting');
      p.child.kill('SIGTERM');
      await p.exited;
      assert.equal(await cancelWithV2(call.taskId), 'input_required');
    });

    it('isError result: exit 5 (tool_is_error), the result on stdout', { timeout: 30_000 }, async () => {
      const r = await runInspector(callArgs(srv.url, era, 'lint_report', LINT));
      assert.equal(r.code, 5);
      assert.equal(r.json.result.isError, true);
      assert.match(textOf(r.json.result), LINT_TEXT);
      assert.equal(JSON.parse(r.stderr).error.code, 'tool_is_error');
    });

    it('unknown tool: exit 5 (tool_not_found), checked against tools/list without a call', { timeout: 30_000 }, async () => {
      const from = srv.rec.exchanges.length;
      const r = await runInspector(callArgs(srv.url, era, 'no_such_tool', {}));
      assert.equal(r.code, 5);
      assert.deepEqual(JSON.parse(r.stderr).error, { code: 'tool_not_found', message: "Tool 'no_such_tool' not found on server." });
      assert.equal(callsSince(srv.rec, from).length, 0);
    });

    it('resume, cancel and unknown task by ID: cannot (tasks/* are not --cli methods)', { timeout: 30_000 }, async () => {
      const methods = ['tasks/get', 'tasks/result', 'tasks/cancel'];
      const runs = await Promise.all(methods.map((method) => runInspector(['--server-url', srv.url, '--protocol-era', era, '--method', method, '--task-id', UNKNOWN_TASK, '--format', 'json'])));
      runs.forEach((r, i) => {
        assert.equal(r.code, 1);
        assert.match(JSON.parse(r.stdout || r.stderr).error.message, new RegExp(`^Unsupported method: ${methods[i]}\\.`));
      });
    });
  });
}
