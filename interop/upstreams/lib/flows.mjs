// The flows, registered once per upstream × transport × upstream protocol
// revision: mcptaskd (-config with the upstream in mcpServers) in front of
// the upstream program, driven by the TypeScript SDK 1.32.2 client on
// mcptaskd's 2025-11-25 tasks wire (tasks/get polling, tasks/result with
// an elicitation handler, tasks/cancel), and the upstream's own record of
// what it saw (lib/events.mjs).

import { describe, before, after, it } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { CallToolResultSchema } from '@modelcontextprotocol/sdk/types.js';
import {
  alive,
  connectHttp,
  pollTask,
  readEvents,
  runCli,
  startHttpServer,
  startHttpUpstream,
  startTask,
  stdioUpstream,
  tempDir,
  textOf,
  until,
  waitEvent,
  writeConfig,
  TERMINAL,
} from './harness.mjs';

const T = { timeout: 60_000 };

/**
 * upstreamFlows registers the flows of one variant.
 *
 * @param {object} v
 * @param {string} v.server        'v2' or 'fastmcp' (as the program records it)
 * @param {string} v.program       lib/ file of the upstream program
 * @param {'stdio'|'http'} v.transport
 * @param {string} [v.protocolVersion]  asked of the upstream (default: mcptaskd's, 2025-11-25)
 * @param {(c: object, result: object, events: object[]) => void} [v.checkAsk]
 *        replaces the elicitation flows' checks where the upstream cannot ask
 *        (it then gets the task's result and the upstream's events)
 * @param {string} [v.askTodo]     marks the elicitation flows todo, naming why
 */
export function upstreamFlows(v) {
  const label = `${v.server} over ${v.transport}${v.protocolVersion ? `, upstream protocol ${v.protocolVersion}` : ''}`;
  describe(label, () => {
    const events = join(tempDir('mcptask-upstreams-'), 'events.jsonl');
    let upstream; // the HTTP upstream's process (stdio ones are mcptaskd's children)
    const entry = (extra = {}) => {
      const base = { task: 'optional', ...(v.protocolVersion ? { protocolVersion: v.protocolVersion } : {}), ...extra };
      return v.transport === 'stdio' ? stdioUpstream(v.program, events, base) : { url: upstream.url, ...base };
    };
    const mine = (pred) => (e) => e.server === v.server && e.transport === v.transport && pred(e);

    let server;
    before(async () => {
      if (v.transport === 'http') upstream = await startHttpUpstream(v.program, events);
      server = await startHttpServer({ extraArgs: ['-config', writeConfig({ up: entry() })], timeoutMs: 60_000 });
    });
    after(async () => {
      const { code, signal, stderr } = await server.stop();
      await upstream?.stop();
      assert.equal(code, 0, `mcptaskd exited with code ${code} (signal ${signal}); stderr:\n${stderr}`);
      assert.doesNotMatch(stderr, /panic/, `mcptaskd panicked:\n${stderr}`);
    });

    it('its plain tools are listed with task support (the gateway makes the tasks)', T, async () => {
      const c = await connectHttp(server.url);
      try {
        for (const name of ['slow', 'confirm']) {
          const tool = c.tools.find((t) => t.name === name);
          assert.ok(tool, `tools: ${c.tools.map((t) => t.name).join(', ')}`);
          assert.equal(tool.execution?.taskSupport, 'optional', name);
        }
      } finally {
        await c.close();
      }
    });

    it('a long call runs as a task, followed: its progress is the status message, its end notified', T, async () => {
      const c = await connectHttp(server.url);
      try {
        const created = await startTask(c.client, 'slow', { steps: 4, stepMs: 150 });
        const messages = new Set();
        const { task, statuses } = await pollTask(
          c.client,
          created.taskId,
          (t) => {
            if (t.statusMessage) messages.add(t.statusMessage);
            return TERMINAL.has(t.status);
          },
          { timeoutMs: 30_000, maxIntervalMs: 50 },
        );
        assert.equal(task.status, 'completed', `statuses ${statuses}; ${task.statusMessage}`);
        assert.ok(statuses.includes('working'), `statuses ${statuses}`);
        assert.ok([...messages].some((m) => /^step \d of 4$/.test(m)), `status messages: ${[...messages].join(' | ')}`);
        // The session's GET stream carried notifications/tasks/status too.
        await until(
          () => c.statusNotes.some((n) => n.taskId === created.taskId && n.status === 'completed'),
          10_000,
          () => `notifications/tasks/status: ${JSON.stringify(c.statusNotes)}`,
        );
        const result = await c.client.experimental.tasks.getTaskResult(created.taskId, CallToolResultSchema);
        assert.match(textOf(result), new RegExp(`slow done after 4 steps \\(${v.server} over ${v.transport}\\)`));
        const runs = readEvents(events).filter(mine((e) => e.tool === 'slow' && e.event === 'started' && e.steps === 4));
        assert.equal(runs.length, 1, 'the upstream ran the call once');
        assert.deepEqual(c.errors.map(String), []);
      } finally {
        await c.close();
      }
    });

    for (const [action, answer, want] of [
      ['accepted', { action: 'accept', content: { approve: true } }, /^answer: accept \{"approve":true\}$/],
      ['declined', { action: 'decline' }, /^answer: decline$/],
    ]) {
      it(`the upstream's elicitation is the task's input, ${action} by the client`, { ...T, todo: v.askTodo }, async () => {
        const c = await connectHttp(server.url);
        try {
          c.answer = () => answer;
          const question = `approve ${action} ${Math.random().toString(36).slice(2, 8)}?`;
          const created = await startTask(c.client, 'confirm', { question });
          // The upstream asked at once: the task waits for its input.
          const { task } = await pollTask(c.client, created.taskId, (t) => t.status === 'input_required' || TERMINAL.has(t.status));
          const result = await c.client.experimental.tasks.getTaskResult(created.taskId, CallToolResultSchema);
          const seen = readEvents(events).filter(mine((e) => e.tool === 'confirm'));
          if (v.checkAsk) {
            v.checkAsk(c, result, seen, task);
            return;
          }
          // The task waited for its input: either seen input_required, or
          // already answered (mcptaskd may deliver the question on the
          // session's GET stream before tasks/result) and completed.
          assert.ok(task.status === 'input_required' || task.status === 'completed', `status ${task.status} (${task.statusMessage})`);
          assert.equal(c.elicitations.length, 1, 'the client was asked once');
          const req = c.elicitations[0].params;
          assert.equal(req.message, question);
          assert.deepEqual(req.requestedSchema.required, ['approve']);
          assert.equal(req._meta?.['io.modelcontextprotocol/related-task']?.taskId, created.taskId);
          assert.notEqual(result.isError, true, textOf(result));
          assert.match(textOf(result), want);
          assert.deepEqual(seen.filter((e) => e.event === 'answered').at(-1)?.answer, answer, 'the upstream got the answer');
          const done = await c.client.experimental.tasks.getTask(created.taskId);
          assert.equal(done.status, 'completed');
          assert.deepEqual(c.errors.map(String), []);
        } finally {
          await c.close();
        }
      });
    }

    if (v.protocolVersion === '2026-07-28') {
      it("a relayed result carries mcptaskd's own _meta, not the upstream's 2026-07-28 serverInfo", T, async () => {
        const c = await connectHttp(server.url);
        try {
          const created = await startTask(c.client, 'slow', { steps: 1, stepMs: 10 });
          const result = await c.client.experimental.tasks.getTaskResult(created.taskId, CallToolResultSchema);
          assert.equal(result._meta?.['io.modelcontextprotocol/serverInfo'], undefined, JSON.stringify(result._meta));
        } finally {
          await c.close();
        }
      });
    }

    it('the Go mcptask CLI on the 2026-07-28 wire: a task followed to its result, and a question answered', T, async () => {
      const slow = await runCli(server.url, ['--wire', '2026-07-28', 'call', 'slow', 'steps:=3', 'stepMs:=100']);
      assert.equal(slow.code, 0, `exit ${slow.code}; stdout:\n${slow.stdout}\nstderr:\n${slow.stderr}`);
      assert.match(slow.stdout, /slow done after 3 steps/);
      assert.match(slow.stderr, /step \d of 3/, 'the status line showed the progress');
      const ask = await runCli(server.url, ['--wire', '2026-07-28', 'call', 'confirm', 'question=deploy from the CLI?', '--answer', 'approve=true']);
      if (v.checkAsk) {
        // The upstream cannot ask (see checkAsk): the tool's isError, exit 1.
        assert.equal(ask.code, 1, `exit ${ask.code}; stdout:\n${ask.stdout}\nstderr:\n${ask.stderr}`);
        return;
      }
      assert.equal(ask.code, 0, `exit ${ask.code}; stdout:\n${ask.stdout}\nstderr:\n${ask.stderr}`);
      assert.match(ask.stdout, /answer: accept \{"approve":true\}/);
    });

    it('a cancel of the task reaches the upstream, which stops the call', T, async () => {
      const c = await connectHttp(server.url);
      try {
        const steps = 600 + Math.floor(Math.random() * 100); // names this call among the upstream's
        const created = await startTask(c.client, 'slow', { steps, stepMs: 50 });
        await pollTask(c.client, created.taskId, (t) => new RegExp(`^step \\d+ of ${steps}$`).test(t.statusMessage ?? '') || TERMINAL.has(t.status), {
          maxIntervalMs: 50,
        });
        const started = await waitEvent(events, mine((e) => e.event === 'started' && e.steps === steps), 10_000, 'start');
        await c.client.experimental.tasks.cancelTask(created.taskId);
        const aborted = await waitEvent(events, mine((e) => e.event === 'aborted' && e.run === started.run), 20_000, `abort of run ${started.run}`);
        const t = await c.client.experimental.tasks.getTask(created.taskId);
        assert.equal(t.status, 'cancelled');
        assert.ok(!readEvents(events).some((e) => e.run === started.run && e.event === 'done'), 'the call did not run to its end');
        // What told the upstream (its SDK's reason for the abort).
        assert.ok(aborted.reason !== undefined);
      } finally {
        await c.close();
      }
    });

    it(
      v.transport === 'stdio'
        ? 'kill -9 of mcptaskd: the stdio upstream dies with it; after the restart the task is resolved by its recovery policy'
        : 'kill -9 of mcptaskd: the HTTP upstream lives on; after the restart the task is resolved by its recovery policy',
      { timeout: 90_000 },
      async () => {
        // Two entries for the same upstream: one tool left at the default
        // (not rerunnable: "outcome unknown"), one declared rerunnable
        // (called again after the restart).
        const config = writeConfig({ once: entry({ prefix: 'once_' }), again: entry({ prefix: 'again_', rerunnable: true }) });
        const dir = tempDir();
        let s = await startHttpServer({ dir, extraArgs: ['-config', config], timeoutMs: 60_000 });
        let c = await connectHttp(s.url);
        // Calls of 1.5-3 s, killed right after their first step;
        // their step counts (once) and step lengths (again) name them.
        const onceSteps = 40 + Math.floor(Math.random() * 20);
        const againMs = 300 + Math.floor(Math.random() * 100);
        const isOnce = mine((e) => e.tool === 'slow' && e.event === 'started' && e.steps === onceSteps);
        const isAgain = mine((e) => e.tool === 'slow' && e.event === 'started' && e.stepMs === againMs);
        let onceTask, againTask, onceRun, againRun;
        try {
          onceTask = (await startTask(c.client, 'once_slow', { steps: onceSteps, stepMs: 50 })).taskId;
          againTask = (await startTask(c.client, 'again_slow', { steps: 5, stepMs: againMs })).taskId;
          onceRun = await waitEvent(events, isOnce, 20_000, 'start of once_slow');
          againRun = await waitEvent(events, isAgain, 20_000, 'start of again_slow');
          const { task } = await pollTask(c.client, onceTask, (t) => /^step \d+ of/.test(t.statusMessage ?? '') || TERMINAL.has(t.status), { maxIntervalMs: 50 });
          assert.equal(task.status, 'working', 'the call runs when mcptaskd is killed');
        } finally {
          await c.client.close();
        }
        await s.kill();
        const ended = (run) => mine((e) => e.run === run.run && (e.event === 'aborted' || e.event === 'done'));

        if (v.transport === 'stdio') {
          // A parent-death signal takes the children with mcptaskd.
          await until(() => !alive(onceRun.pid) && !alive(againRun.pid), 10_000, () => `upstream processes ${onceRun.pid}, ${againRun.pid} outlived mcptaskd`);
          // It may see its stdin close (and log an abort) before the
          // signal ends it; it never finishes the call.
          const finished = (run) => mine((e) => e.run === run.run && e.event === 'done');
          assert.ok(!readEvents(events).some(finished(onceRun)), 'the stdio call died with its process');
        } else {
          assert.ok(alive(upstream.pid), 'the HTTP upstream outlives mcptaskd');
          // What the upstream does with a call whose client went away:
          // v2 aborts its signal; fastmcp runs it on to its end.
          const end = await waitEvent(events, ended(onceRun), 20_000, 'the end of the killed call');
          assert.equal(end.event, v.httpDisconnect ?? 'aborted', `the killed call: ${JSON.stringify(end)}`);
        }

        s = await startHttpServer({ dir, extraArgs: ['-config', config], timeoutMs: 60_000 });
        c = await connectHttp(s.url);
        try {
          const lost = await pollTask(c.client, onceTask, undefined, { timeoutMs: 30_000 });
          assert.equal(lost.task.status, 'failed', `statuses ${lost.statuses}; ${lost.task.statusMessage}`);
          assert.match(lost.task.statusMessage ?? '', /outcome (is )?unknown/i);
          const rerun = await pollTask(c.client, againTask, undefined, { timeoutMs: 40_000 });
          assert.equal(rerun.task.status, 'completed', `statuses ${rerun.statuses}; ${rerun.task.statusMessage}`);
          assert.equal(readEvents(events).filter(isAgain).length, 2, 'the rerunnable call was made again, once');
          assert.equal(readEvents(events).filter(isOnce).length, 1, 'the other was not');
        } finally {
          await c.close();
          const { code, stderr } = await s.stop();
          assert.equal(code, 0, `mcptaskd exited with code ${code}; stderr:\n${stderr}`);
          assert.doesNotMatch(stderr, /panic/);
        }
      },
    );
  });
}
