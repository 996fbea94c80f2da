// mcptaskd over Streamable HTTP (2025-11-25 stateful sessions) with the
// TypeScript SDK's StreamableHTTPClientTransport. One server process for
// this file, on 127.0.0.1 port 0 with a temporary database; each flow opens
// its own session.

import { describe, before, after, it } from 'node:test';
import assert from 'node:assert/strict';
import { startHttpServer } from '../lib/server.mjs';
import { connectHttp, expectMcpError, pollTask, startTask } from '../lib/client.mjs';
import { registerFlows } from '../lib/flows.mjs';

describe('Streamable HTTP', () => {
  let server;
  before(async () => {
    server = await startHttpServer();
  });
  after(async () => {
    const { code, signal, stderr } = await server.stop();
    assert.equal(code, 0, `mcptaskd exited with code ${code} (signal ${signal}); stderr:\n${stderr}`);
    assert.doesNotMatch(stderr, /panic|level=ERROR/, `mcptaskd logged errors:\n${stderr}`);
  });

  registerFlows(() => connectHttp(server.url));

  it('tasks/list is per session for anonymous clients; a cursor of another session gives -32602', { timeout: 60_000 }, async () => {
    const a = await connectHttp(server.url);
    const b = await connectHttp(server.url);
    try {
      const ids = [];
      for (let i = 0; i < 51; i++) ids.push((await startTask(a.client, 'long_computation', { n: 10, steps: 1, step_delay_ms: 0 })).taskId);
      await pollTask(a.client, ids.at(-1));
      const pageA = await a.client.experimental.tasks.listTasks();
      assert.equal(pageA.tasks.length, 50);
      assert.ok(pageA.nextCursor);

      // Session b sees none of a's tasks and cannot use a's cursor.
      assert.deepEqual((await b.client.experimental.tasks.listTasks()).tasks, []);
      await expectMcpError(b.client.experimental.tasks.listTasks(pageA.nextCursor), -32602, /cursor/);
      // Task IDs are the capability: b may read a's task by its ID.
      assert.equal((await b.client.experimental.tasks.getTask(ids[0])).taskId, ids[0]);
      assert.deepEqual([...a.errors, ...b.errors].map(String), []);
    } finally {
      await a.close();
      await b.close();
    }
  });
});
