// The interop flows, run over each transport by test/*.test.mjs: the
// 2025-11-25 tasks wire of mcptaskd driven by the TypeScript SDK client the
// way a host drives it (client.experimental.tasks.*), with client.request
// and the SDK's result schemas only where the SDK has no helper or where a
// helper's client-side guard would keep the request from the server.

import { it } from 'node:test';
import assert from 'node:assert/strict';
import {
  CallToolResultSchema,
  CreateTaskResultSchema,
  ErrorCode,
  RELATED_TASK_META_KEY,
} from '@modelcontextprotocol/sdk/types.js';
import { collect, expectMcpError, pollTask, startTask, textOf, TERMINAL, until } from './client.mjs';

const INVALID_PARAMS = ErrorCode.InvalidParams; // -32602
const METHOD_NOT_FOUND = ErrorCode.MethodNotFound; // -32601
const INTERNAL_ERROR = ErrorCode.InternalError; // -32603
const INVALID_REQUEST = ErrorCode.InvalidRequest; // -32600

// Server settings the flows check (mcptaskd defaults).
const MAX_TTL_MS = 24 * 60 * 60 * 1000;
const DEFAULT_TTL_MS = 60 * 60 * 1000;
const POLL_INTERVAL_MS = 500;
const PAGE_SIZE = 50;

const ISO_TIME = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$/;

// A task of long_computation that completes at once: 25 primes up to 100.
const quickArgs = { n: 100, steps: 2, step_delay_ms: 0 };
const quickText = 'There are 25 primes up to 100 (computed in 2 steps).';

function checkTaskShape(t) {
  assert.equal(typeof t.taskId, 'string');
  assert.match(t.taskId, /^[A-Za-z0-9._:-]+$/);
  assert.match(t.createdAt, ISO_TIME);
  assert.match(t.lastUpdatedAt, ISO_TIME);
  assert.equal(typeof t.ttl, 'number');
  assert.equal(t.pollInterval, POLL_INTERVAL_MS);
}

function relatedTaskOf(result) {
  return result?._meta?.[RELATED_TASK_META_KEY];
}

/**
 * registerFlows registers one test per flow. connect() opens a new client
 * connection (a fresh session over HTTP, a fresh server process and
 * database over stdio); each flow closes its connections.
 *
 * @param {() => Promise<import('./client.mjs').Conn>} connect
 */
export function registerFlows(connect) {
  // flow wraps a test body with a connection and checks, at the end, that
  // the client reported no transport or protocol error of its own.
  const flow = (name, body, opts = {}) =>
    it(name, { timeout: 60_000, ...opts }, async (t) => {
      const conn = await connect();
      let failure;
      try {
        await body(conn, t);
        assert.deepEqual(conn.errors.map(String), [], 'the SDK client reported errors (onerror)');
      } catch (e) {
        failure = e;
      }
      try {
        await conn.close();
      } catch (e) {
        failure ??= e; // the flow's own failure is the one to report
      }
      if (failure) throw failure;
    });

  flow('initialize: server declares the tasks capability (list, cancel, requests.tools.call, and mcptask\'s delete)', async ({ client, transport, kind }) => {
    const caps = client.getServerCapabilities();
    assert.deepEqual(caps.tasks, { list: {}, cancel: {}, delete: {}, requests: { tools: { call: {} } } });
    assert.ok(caps.tools, 'tools capability');
    assert.equal(client.getServerVersion()?.name, 'mcptaskd');
    if (kind === 'http') {
      assert.equal(transport.protocolVersion, '2025-11-25');
      assert.ok(transport.sessionId, 'the 2025-11-25 HTTP wire is stateful: a session ID');
    }
  });

  flow('tools/list: execution.taskSupport per tool, as the SDK reads it', async ({ client, tools }) => {
    const support = Object.fromEntries(tools.map((t) => [t.name, t.execution?.taskSupport]));
    assert.deepEqual(support, {
      long_computation: 'optional',
      deploy_with_confirmation: 'required',
      flaky_migration: 'optional',
      lint_report: 'optional',
      echo: 'forbidden',
    });
    // The SDK caches the support levels from listTools.
    assert.equal(client.isToolTask('long_computation'), true);
    assert.equal(client.isToolTask('deploy_with_confirmation'), true);
    assert.equal(client.isToolTaskRequired('deploy_with_confirmation'), true);
    assert.equal(client.isToolTaskRequired('long_computation'), false);
    assert.equal(client.isToolTask('echo'), false);
  });

  flow('task call: create, poll tasks/get until completed, tasks/result with text and related-task _meta', async ({ client }) => {
    const created = await startTask(client, 'long_computation', { n: 100, steps: 3, step_delay_ms: 100 }, { ttl: 60_000 });
    checkTaskShape(created);
    assert.equal(created.status, 'working');
    assert.equal(created.ttl, 60_000);

    const { task, statuses } = await pollTask(client, created.taskId);
    assert.equal(task.status, 'completed', `statusMessage: ${task.statusMessage}`);
    assert.equal(task.taskId, created.taskId);
    assert.equal(task.ttl, 60_000);
    assert.equal(task.createdAt, created.createdAt);
    assert.ok(statuses.every((s) => s === 'working' || s === 'completed'), `statuses seen: ${statuses}`);
    assert.match(task.statusMessage ?? '', /^done: 25 primes up to 100$/);

    const result = await client.experimental.tasks.getTaskResult(created.taskId, CallToolResultSchema);
    assert.equal(textOf(result), 'There are 25 primes up to 100 (computed in 3 steps).');
    assert.deepEqual(result.structuredContent, { n: 100, primes: 25, steps: 3 });
    assert.ok(!result.isError);
    assert.deepEqual(relatedTaskOf(result), { taskId: created.taskId });

    // tasks/result of a completed task can be fetched again.
    const again = await client.experimental.tasks.getTaskResult(created.taskId, CallToolResultSchema);
    assert.equal(textOf(again), textOf(result));
  });

  flow('task call: tasks/result blocks until the task completes', async ({ client }) => {
    const created = await startTask(client, 'long_computation', { n: 1000, steps: 5, step_delay_ms: 100 });
    const t0 = Date.now();
    const result = await client.experimental.tasks.getTaskResult(created.taskId, CallToolResultSchema);
    assert.equal(textOf(result), 'There are 168 primes up to 1000 (computed in 5 steps).');
    assert.deepEqual(relatedTaskOf(result), { taskId: created.taskId });
    assert.ok(Date.now() - t0 >= 200, 'tasks/result answered before the work could have finished');
    assert.equal((await client.experimental.tasks.getTask(created.taskId)).status, 'completed');
  });

  flow('task call through callToolStream: taskCreated, taskStatus…, result', async ({ client }) => {
    const msgs = await collect(client.experimental.tasks.callToolStream({ name: 'long_computation', arguments: quickArgs }));
    assert.equal(msgs[0].type, 'taskCreated', JSON.stringify(msgs[0]));
    const last = msgs.at(-1);
    assert.equal(last.type, 'result', `last message: ${JSON.stringify(last, null, 1)}`);
    assert.equal(textOf(last.result), quickText);
    assert.deepEqual(relatedTaskOf(last.result), { taskId: msgs[0].task.taskId });
    const statuses = msgs.filter((m) => m.type === 'taskStatus').map((m) => m.task.status);
    assert.equal(statuses.at(-1), 'completed');
  });

  // mcptaskd sends notifications/tasks/status for every status change of
  // the tasks a session created, over stdio and over Streamable HTTP (on
  // the session's standalone GET stream, which the SDK opens itself): the
  // client learns the task completed without polling tasks/get.
  flow('notifications/tasks/status follow the task to completed without polling', async (conn, t) => {
    const { client, kind } = conn;
    const created = await startTask(client, 'long_computation', { n: 100, steps: 3, step_delay_ms: 100 });
    const mine = () => conn.statusNotes.filter((n) => n.taskId === created.taskId);
    await until(() => mine().some((n) => TERMINAL.has(n.status)), 30_000, () => `${kind}: notifications so far: ${JSON.stringify(mine())}`);
    const notes = mine();
    t.diagnostic(`${kind}: ${notes.length} status notifications: ${notes.map((n) => `${n.status} ${n.statusMessage ?? ''}`).join(' | ')}`);
    for (const n of notes) {
      checkTaskShape(n);
      // 2025-11-25: the notification "SHOULD NOT include the related-task metadata".
      assert.equal(n._meta?.[RELATED_TASK_META_KEY], undefined, JSON.stringify(n));
    }
    assert.ok(notes.every((n) => n.status === 'working' || n.status === 'completed'), notes.map((n) => n.status).join());
    assert.equal(notes.at(-1).status, 'completed');
    assert.ok(notes.some((n) => /step/i.test(n.statusMessage ?? '')), `no step message among ${notes.map((n) => n.statusMessage).join(' | ')}`);
    const result = await client.experimental.tasks.getTaskResult(created.taskId, CallToolResultSchema);
    assert.equal(textOf(result), 'There are 25 primes up to 100 (computed in 3 steps).');
  });

  flow('callToolStream: the status notifications arrive alongside its own polling', async (conn) => {
    const { client } = conn;
    const msgs = await collect(client.experimental.tasks.callToolStream({ name: 'long_computation', arguments: { n: 100, steps: 2, step_delay_ms: 100 } }));
    assert.equal(msgs.at(-1).type, 'result', JSON.stringify(msgs.at(-1)));
    const id = msgs[0].task.taskId;
    await until(() => conn.statusNotes.some((n) => n.taskId === id && n.status === 'completed'), 30_000,
      () => `notifications: ${JSON.stringify(conn.statusNotes)}`);
  });

  flow('tasks/list shows the tasks of this client', async ({ client }) => {
    const a = await startTask(client, 'long_computation', quickArgs);
    const b = await startTask(client, 'lint_report', { source: 'package main\n', line_delay_ms: 0 });
    await pollTask(client, a.taskId);
    await pollTask(client, b.taskId);
    const { tasks, nextCursor } = await client.experimental.tasks.listTasks();
    assert.equal(nextCursor, undefined);
    const byId = new Map(tasks.map((t) => [t.taskId, t]));
    assert.equal(tasks.length, 2, JSON.stringify(tasks));
    assert.equal(byId.get(a.taskId)?.status, 'completed');
    assert.equal(byId.get(b.taskId)?.status, 'completed');
    for (const t of tasks) checkTaskShape(t);
  });

  flow(`tasks/list pagination: ${PAGE_SIZE + 5} tasks over two pages; a tampered cursor gives -32602`, async ({ client }) => {
    const want = new Set();
    for (let i = 0; i < PAGE_SIZE + 5; i++) {
      want.add((await startTask(client, 'long_computation', { n: 10 + i, steps: 1, step_delay_ms: 0 })).taskId);
    }
    const pages = [];
    let cursor;
    do {
      const page = await client.experimental.tasks.listTasks(cursor);
      pages.push(page);
      cursor = page.nextCursor;
      assert.ok(pages.length <= 10, 'too many pages');
    } while (cursor);
    assert.deepEqual(
      pages.map((p) => p.tasks.length),
      [PAGE_SIZE, 5],
    );
    const seen = pages.flatMap((p) => p.tasks.map((t) => t.taskId));
    assert.equal(new Set(seen).size, seen.length, 'a task appears on two pages');
    assert.deepEqual(new Set(seen), want);

    const good = pages[0].nextCursor;
    assert.equal(typeof good, 'string');
    // Change one character in the middle of the cursor.
    const i = Math.floor(good.length / 2);
    const tampered = good.slice(0, i) + (good[i] === 'A' ? 'B' : 'A') + good.slice(i + 1);
    await expectMcpError(client.experimental.tasks.listTasks(tampered), INVALID_PARAMS, /cursor/);
    await expectMcpError(client.experimental.tasks.listTasks('not a cursor'), INVALID_PARAMS, /cursor/);
    // The cursor still works after the bad ones.
    assert.equal((await client.experimental.tasks.listTasks(good)).tasks.length, 5);
  });

  flow('tasks/cancel of a running task: status cancelled; a second cancel gives -32602', async ({ client }) => {
    const created = await startTask(client, 'long_computation', { n: 100_000, steps: 100, step_delay_ms: 100 });
    // Progress shows in the status message.
    const { task: running } = await pollTask(client, created.taskId, (t) => /^step \d+ of 100: sieving/.test(t.statusMessage ?? '') || TERMINAL.has(t.status));
    assert.equal(running.status, 'working');

    const cancelled = await client.experimental.tasks.cancelTask(created.taskId);
    assert.equal(cancelled.taskId, created.taskId);
    assert.equal(cancelled.status, 'cancelled');
    checkTaskShape(cancelled);

    await expectMcpError(client.experimental.tasks.cancelTask(created.taskId), INVALID_PARAMS, /cancelled/);
    assert.equal((await client.experimental.tasks.getTask(created.taskId)).status, 'cancelled');
    // A cancelled task has no result.
    await expectMcpError(client.experimental.tasks.getTaskResult(created.taskId, CallToolResultSchema), INVALID_PARAMS, /cancelled/);
    // It stays cancelled (the work does not complete it afterwards).
    await new Promise((r) => setTimeout(r, 300));
    const { tasks } = await client.experimental.tasks.listTasks();
    assert.equal(tasks.find((t) => t.taskId === created.taskId)?.status, 'cancelled');
  });

  flow('tasks/cancel of a completed task gives -32602', async ({ client }) => {
    const created = await startTask(client, 'long_computation', quickArgs);
    await pollTask(client, created.taskId);
    await expectMcpError(client.experimental.tasks.cancelTask(created.taskId), INVALID_PARAMS, /completed/);
  });

  flow('input_required: the client answers elicitation/create (related-task) and the task completes', async (conn) => {
    const { client } = conn;
    conn.answer = () => ({ action: 'accept', content: { confirm: true } });
    const msgs = await collect(
      client.experimental.tasks.callToolStream({
        name: 'deploy_with_confirmation',
        arguments: { service: 'api', version: 'v2', build_steps: 1, step_delay_ms: 0 },
      }),
    );
    assert.equal(msgs[0].type, 'taskCreated');
    const taskId = msgs[0].task.taskId;
    const last = msgs.at(-1);
    assert.equal(last.type, 'result', `last message: ${JSON.stringify(last)}`);
    assert.equal(textOf(last.result), 'Deployed api@v2 to production.');
    assert.deepEqual(last.result.structuredContent, { service: 'api', version: 'v2', deployed: true });
    assert.deepEqual(relatedTaskOf(last.result), { taskId });
    // The question came once: on the tasks/result stream, or (a client
    // that has not opened it yet) on the session's own channel.

    assert.equal(conn.elicitations.length, 1);
    const req = conn.elicitations[0];
    assert.equal(req.method, 'elicitation/create');
    assert.equal(req.params.mode, 'form');
    assert.match(req.params.message, /The build of api@v2 succeeded\. Roll it out to production now\?/);
    assert.deepEqual(req.params.requestedSchema.required, ['confirm']);
    assert.deepEqual(req.params._meta?.[RELATED_TASK_META_KEY], { taskId });

    const done = await client.experimental.tasks.getTask(taskId);
    assert.equal(done.status, 'completed');
    assert.match(done.statusMessage ?? '', /done: api@v2 deployed/);
  });

  flow('input_required: poll to input_required, then tasks/result carries the question; a decline aborts', async (conn) => {
    const { client } = conn;
    conn.answer = () => ({ action: 'decline' });
    const created = await startTask(client, 'deploy_with_confirmation', { service: 'web', build_steps: 1, step_delay_ms: 0 });
    const { task } = await pollTask(client, created.taskId, (t) => t.status !== 'working');
    // The question may already have been asked on the session's own
    // channel (and declined) while the client polled.
    assert.ok(['input_required', 'completed'].includes(task.status), task.status);

    const result = await client.experimental.tasks.getTaskResult(created.taskId, CallToolResultSchema);
    assert.equal(textOf(result), 'Deployment of web@latest aborted: the user declined. Nothing was rolled out.');
    assert.deepEqual(result.structuredContent, { service: 'web', version: 'latest', deployed: false });
    assert.equal(conn.elicitations.length, 1);
    assert.deepEqual(conn.elicitations[0].params._meta?.[RELATED_TASK_META_KEY], { taskId: created.taskId });
  });

  flow('plain call to an optional task tool returns a normal CallToolResult', async ({ client }) => {
    const result = await client.callTool({ name: 'long_computation', arguments: quickArgs });
    assert.equal(textOf(result), quickText);
    assert.deepEqual(result.structuredContent, { n: 100, primes: 25, steps: 2 });
    assert.ok(!result.isError);
    assert.equal(result.task, undefined);
    assert.equal(relatedTaskOf(result), undefined);
    // No task was created.
    assert.deepEqual((await client.experimental.tasks.listTasks()).tasks, []);
  });

  // The -32601 answers say why (the go-sdk v1.8.0 would replace the
  // message with 'method not found: "tools/call"'; adapter.MethodNotFound
  // keeps it).
  flow('plain call to a task-required tool: the SDK refuses locally; sent anyway, the server answers -32601', async ({ client }) => {
    await expectMcpError(client.callTool({ name: 'deploy_with_confirmation', arguments: { service: 'api' } }), INVALID_REQUEST, /requires task-based execution/);
    // What a client without the SDK's guard gets from the server.
    await expectMcpError(
      client.request({ method: 'tools/call', params: { name: 'deploy_with_confirmation', arguments: { service: 'api' } } }, CallToolResultSchema),
      METHOD_NOT_FOUND,
      /must be called as a task/,
    );
  });

  flow('task call to a tool without task support (echo) gives -32601; a plain call works', async ({ client }) => {
    const msgs = await collect(
      client.experimental.tasks.callToolStream({ name: 'echo', arguments: { text: 'hi' } }, CallToolResultSchema, { task: { ttl: 60_000 } }),
    );
    assert.equal(msgs.length, 1);
    assert.equal(msgs[0].type, 'error');
    assert.equal(msgs[0].error.code, METHOD_NOT_FOUND, msgs[0].error.message);
    assert.match(msgs[0].error.message, /does not support task-augmented calls/);
    // A plain call (callToolStream adds no task for a forbidden tool).
    const plain = await collect(client.experimental.tasks.callToolStream({ name: 'echo', arguments: { text: 'hi' } }));
    assert.deepEqual(
      plain.map((m) => m.type),
      ['result'],
    );
    assert.equal(textOf(plain[0].result), 'hi');
    assert.deepEqual((await client.experimental.tasks.listTasks()).tasks, []);
  });

  flow("flaky_migration as a task: status failed; tasks/result rejects with the tool's JSON-RPC error", async ({ client }) => {
    const created = await startTask(client, 'flaky_migration', { steps: 3, fail_at_step: 2, step_delay_ms: 0 });
    const { task } = await pollTask(client, created.taskId);
    assert.equal(task.status, 'failed');
    const err = await expectMcpError(
      client.experimental.tasks.getTaskResult(created.taskId, CallToolResultSchema),
      INTERNAL_ERROR,
      /migration 0042_add_orders_index failed at step 2 of 3: lock wait timeout/,
    );
    assert.deepEqual(err.data, { migration: '0042_add_orders_index', failedStep: 2, steps: 3, rolledBack: true });

    // The SDK's stream reports the failure too.
    const msgs = await collect(client.experimental.tasks.callToolStream({ name: 'flaky_migration', arguments: { steps: 1, step_delay_ms: 0 } }));
    assert.equal(msgs.at(-1).type, 'error');
    assert.match(msgs.at(-1).error.message, /failed/);
  });

  flow('lint_report as a task: status failed; tasks/result returns the CallToolResult with isError', async ({ client }) => {
    const created = await startTask(client, 'lint_report', { line_delay_ms: 0 });
    const { task } = await pollTask(client, created.taskId);
    assert.equal(task.status, 'failed', 'on the 2025-11-25 wire a tool error (isError:true) shows as failed');
    const result = await client.experimental.tasks.getTaskResult(created.taskId, CallToolResultSchema);
    assert.equal(result.isError, true);
    assert.match(textOf(result), /^Found 3 problems in 6 lines:\nline 4: trailing-whitespace/);
    assert.equal(result.structuredContent?.lines, 6);
    assert.deepEqual(relatedTaskOf(result), { taskId: created.taskId });

    // Clean source: a normal completed task.
    const clean = await startTask(client, 'lint_report', { source: 'package main\n', line_delay_ms: 0 });
    assert.equal((await pollTask(client, clean.taskId)).task.status, 'completed');
    const ok = await client.experimental.tasks.getTaskResult(clean.taskId, CallToolResultSchema);
    assert.equal(textOf(ok), 'No problems found in 1 lines.');
    assert.ok(!ok.isError);
  });

  flow('params.task.ttl: negative, fractional or non-numeric gives -32602; huge is capped at 24h; absent is the 1h default', async ({ client }) => {
    for (const ttl of [-1, -86_400_000, 1.5, 'abc', '60000', true, { ms: 1 }, [60_000]]) {
      await expectMcpError(startTask(client, 'long_computation', quickArgs, { ttl }), INVALID_PARAMS, /ttl/);
    }
    for (const [ttl, want] of [
      [60_000, 60_000],
      [MAX_TTL_MS, MAX_TTL_MS],
      [MAX_TTL_MS + 1, MAX_TTL_MS],
      [1e12, MAX_TTL_MS],
      [Number.MAX_SAFE_INTEGER, MAX_TTL_MS],
      [1e300, MAX_TTL_MS],
      [undefined, DEFAULT_TTL_MS],
    ]) {
      const created = await startTask(client, 'long_computation', quickArgs, ttl === undefined ? {} : { ttl });
      assert.equal(created.ttl, want, `ttl ${ttl}`);
      assert.ok(created.ttl <= MAX_TTL_MS);
      assert.equal((await client.experimental.tasks.getTask(created.taskId)).ttl, want);
    }
    // The bad calls created no task.
    assert.equal((await client.experimental.tasks.listTasks()).tasks.length, 7);
  });

  flow('unknown or malformed task IDs: tasks/result, tasks/get and tasks/cancel give -32602', async ({ client }) => {
    const unknown = 'AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA';
    await expectMcpError(client.experimental.tasks.getTaskResult(unknown, CallToolResultSchema), INVALID_PARAMS, /not found/);
    await expectMcpError(client.experimental.tasks.getTask(unknown), INVALID_PARAMS, /not found/);
    await expectMcpError(client.experimental.tasks.cancelTask(unknown), INVALID_PARAMS, /not found/);
    await expectMcpError(client.experimental.tasks.getTaskResult('no such task!', CallToolResultSchema), INVALID_PARAMS, /taskId/);
    await expectMcpError(client.experimental.tasks.getTaskResult('', CallToolResultSchema), INVALID_PARAMS, /taskId/);
  });

  flow('CreateTaskResult as a raw client.request with the SDK schema', async ({ client }) => {
    // The lowest-level way to create a task with the SDK: client.request
    // with options.task, parsed by CreateTaskResultSchema.
    const res = await client.request(
      { method: 'tools/call', params: { name: 'long_computation', arguments: quickArgs } },
      CreateTaskResultSchema,
      { task: { ttl: 120_000 } },
    );
    checkTaskShape(res.task);
    assert.equal(res.task.ttl, 120_000);
    assert.ok(['working', 'completed'].includes(res.task.status));
    const result = await client.experimental.tasks.getTaskResult(res.task.taskId, CallToolResultSchema);
    assert.equal(textOf(result), quickText);
  });
}
