// Workflows (docs/workflows.md) through @modelcontextprotocol/client 2.4.0
// with @modelcontextprotocol/ext-tasks 0.2.2, on both task wires: the
// workflow `release` of interop/ts/lib/workflow.mjs (a → b ∥ c → d, each
// step a child task of a command) is an ordinary task to the library. While
// it runs, its status message names the running steps; tasks/get of the
// workflow carries its children in _meta["io.mcptask/children"], and a
// child is read by its ID by the same requester, with its parent in
// _meta["io.mcptask/parentTaskId"]. The library then settles it with the
// workflow's result (a line per step, structuredContent {outcome, steps},
// d's argument read from a's result). release_broken: a step that exits
// non-zero ends the workflow with a tool error naming it, and its running
// sibling is cancelled.

import { describe, before, after, it } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { connectV2, textOf, WIRE_2025, WIRE_2026 } from '../lib/v2client.mjs';
import { startServer, until, tempDir } from '../lib/harness.mjs';
import {
  writeWorkflowConfig,
  checkReleaseStructured,
  CHILDREN,
  PARENT,
  RELEASE_ARGS,
  RELEASE_TEXT,
} from '../../ts/lib/workflow.mjs';

const TASK = { task: { preference: 'require' } };
// A Standard Schema that takes any JSON result (for tasks/result).
const ANY = { '~standard': { version: 1, vendor: 'mcptask-interop', validate: (value) => ({ value }) } };
// Between two of the test's own tasks/get: well under mcptaskd's default
// tasks/* rate (50/s per requester) with the library's polls beside them.
const EVERY_MS = 50;

for (const wire of [WIRE_2026, WIRE_2025]) {
  describe(`workflows with the v2 client + ext-tasks, ${wire}`, () => {
    let srv;
    let files;
    before(async () => {
      files = writeWorkflowConfig(tempDir());
      srv = await startServer({ extraArgs: ['-config', files.path] });
    });
    after(async () => {
      await srv?.stop();
    });

    // childrenOf returns the children a task's tasks/get lists, by step.
    const childrenOf = (view) => {
      const list = view.raw?._meta?.[CHILDREN];
      assert.ok(Array.isArray(list), `tasks/get of the workflow without _meta["${CHILDREN}"]: ${JSON.stringify(view.raw)}`);
      return Object.fromEntries(list.map((ch) => [ch.step, ch]));
    };

    // waitView polls the task through the library (tasks/get) until
    // pred(view) holds and returns that view.
    const waitView = async (c, id, pred, what) => {
      let last;
      return until(
        async () => {
          last = await c.session.task(id).snapshot();
          return pred(last) && last;
        },
        20_000,
        () => `${what}; last: ${last?.status} "${last?.statusMessage}" ${JSON.stringify(last?.raw?._meta)}`,
        EVERY_MS,
      );
    };

    it('release: running steps named, children in _meta, a child by its ID, the final result', { timeout: 60_000 }, async (t) => {
      const c = await connectV2(srv.url, { wire });
      try {
        const tool = c.tools.find((x) => x.name === 'release');
        assert.ok(tool, `tools: ${c.tools.map((x) => x.name).join(', ')}`);
        // A task tool: execution.taskSupport on 2025-11-25; on 2026-07-28,
        // whose tools have no such field, mcptask's _meta key.
        const support = wire === WIRE_2025 ? tool.execution?.taskSupport : tool._meta?.['io.mcptask/taskSupport'];
        assert.equal(support, 'required', `release's task support: ${JSON.stringify(tool)}`);
        const ex = await c.session.callTool('release', RELEASE_ARGS, TASK);
        assert.equal(ex.kind, 'task');
        const id = ex.handle.taskId;
        const messages = [];
        const settled = ex.settle({ onEvent: (e) => e.type === 'task' && messages.push(e.task.statusMessage ?? '') });

        // b and c run at once (each waits for its file). The status message
        // may name a step a moment before its child task exists: wait for
        // both.
        const bothRunning = (v) => {
          const ch = v.raw?._meta?.[CHILDREN] ?? [];
          return v.statusMessage === 'running b, c (1 of 4 steps ended)' && ch.filter((x) => x.status === 'working').length === 2;
        };
        let view = await waitView(c, id, bothRunning, 'the workflow naming b and c running, their tasks working');
        assert.equal(view.status, 'working');
        let ch = childrenOf(view);
        assert.deepEqual(Object.keys(ch).sort(), ['a', 'b', 'c']);
        assert.deepEqual(
          Object.fromEntries(Object.entries(ch).map(([s, x]) => [s, [x.tool, x.status]])),
          { a: ['prepare', 'completed'], b: ['unit', 'working'], c: ['e2e', 'working'] },
        );
        for (const x of Object.values(ch)) {
          assert.equal(typeof x.taskId, 'string');
          assert.notEqual(x.taskId, id);
        }

        // b ends: c alone runs.
        writeFileSync(files.goUnit, '');
        view = await waitView(c, id, (v) => v.statusMessage === 'running c (2 of 4 steps ended)', 'the workflow naming c alone running');
        ch = childrenOf(view);
        assert.equal(ch.b.status, 'completed');
        assert.equal(ch.c.status, 'working');

        // A child by its ID, by the same requester: an ordinary task with
        // its parent in _meta.
        const b = await c.session.task(ch.b.taskId).snapshot();
        assert.equal(b.taskId, ch.b.taskId);
        assert.equal(b.status, 'completed');
        assert.equal(b.raw?._meta?.[PARENT], id, JSON.stringify(b.raw));
        const bOutcome = await c.session.task(ch.b.taskId).result();
        assert.equal(bOutcome.status, 'completed');
        assert.deepEqual(bOutcome.result.structuredContent, { suite: 'unit', passed: 12 });
        const cView = await c.session.task(ch.c.taskId).snapshot();
        assert.equal(cView.status, 'working');
        assert.equal(cView.raw?._meta?.[PARENT], id);

        // c ends, then d: the library settles the workflow's task.
        writeFileSync(files.go, '');
        const { outcome } = await settled;
        t.diagnostic(`status messages the library saw: ${JSON.stringify(messages)}`);
        assert.equal(outcome.status, 'completed', outcome.error?.message);
        assert.ok(!outcome.result.isError);
        assert.equal(textOf(outcome.result), RELEASE_TEXT);
        checkReleaseStructured(assert, outcome.result.structuredContent);
        assert.equal(outcome.result.structuredContent.steps.b.taskId, ch.b.taskId);

        // Once ended, tasks/get lists the four children, each completed.
        view = await c.session.task(id).snapshot();
        assert.equal(view.status, 'completed');
        ch = childrenOf(view);
        assert.deepEqual(
          Object.fromEntries(Object.entries(ch).map(([s, x]) => [s, [x.tool, x.status]])),
          { a: ['prepare', 'completed'], b: ['unit', 'completed'], c: ['e2e', 'completed'], d: ['ship', 'completed'] },
        );
      } finally {
        await c.close();
      }
    });

    it('release_broken: a failing step ends the workflow with a tool error; the running sibling is cancelled', { timeout: 60_000 }, async () => {
      const c = await connectV2(srv.url, { wire });
      try {
        const ex = await c.session.callTool('release_broken', RELEASE_ARGS, TASK);
        assert.equal(ex.kind, 'task');
        const id = ex.handle.taskId;
        const { outcome } = await ex.settle();
        let result;
        if (wire === WIRE_2026) {
          // A tool error completes the task, with isError.
          assert.equal(outcome.status, 'completed', outcome.error?.message);
          result = outcome.result;
        } else {
          // 2025: a result with isError shows the task failed; the library
          // reports its status message, tasks/result has the result.
          assert.equal(outcome.status, 'failed');
          result = await c.client.request({ method: 'tasks/result', params: { taskId: id } }, ANY);
        }
        assert.equal(result.isError, true, JSON.stringify(result));
        const text = textOf(result);
        assert.match(text, /^workflow release_broken failed at step b\n/);
        assert.match(text, /\na: ok\n/);
        assert.match(text, /\nb: tool_error \(.*broken exited with code 3/s);
        assert.match(text, /\nc: cancelled/);
        assert.match(text, /\nd: not_started$/);
        const sc = result.structuredContent;
        assert.equal(sc.outcome, 'failed');
        assert.equal(sc.failedStep, 'b');
        assert.equal(sc.steps.a.outcome, 'ok');
        assert.equal(sc.steps.b.outcome, 'tool_error');
        assert.deepEqual(sc.steps.b.result, { exitCode: 3 });
        assert.equal(sc.steps.c.outcome, 'cancelled');
        assert.equal(sc.steps.d.outcome, 'not_started');

        // The children as tasks: b completed with its tool error, c
        // cancelled, d never started.
        const view = await c.session.task(id).snapshot();
        const ch = childrenOf(view);
        assert.deepEqual(Object.keys(ch).sort(), ['a', 'b', 'c']);
        const cView = await c.session.task(ch.c.taskId).snapshot();
        assert.equal(cView.status, 'cancelled');
        assert.equal(ch.c.status, 'cancelled');
        assert.equal(cView.raw?._meta?.[PARENT], id);
      } finally {
        await c.close();
      }
    });
  });
}
