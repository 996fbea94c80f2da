// mcptaskd's gateway in front of an upstream that speaks tasks itself: a
// TypeScript SDK v1 server with its experimental tasks and an in-memory
// task store (lib/taskupstream.mjs), on loopback HTTP. The gateway creates
// the task upstream and records its ID before it answers; mcptaskd is then
// killed (SIGKILL) while the upstream task runs and started again on the
// same database: the task completes by re-attaching to the upstream task,
// and the upstream tool ran once.

import { describe, before, after, it } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { CallToolResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { startHttpServer, tempDir } from '../lib/server.mjs';
import { connectHttp, pollTask, startTask, textOf } from '../lib/client.mjs';
import { startTaskUpstream } from '../lib/taskupstream.mjs';

describe('gateway re-attaches to an upstream task after kill -9', () => {
  let upstream;
  let config;
  before(async () => {
    upstream = await startTaskUpstream();
    config = join(tempDir(), 'mcptaskd.json');
    writeFileSync(config, JSON.stringify({ demo: false, mcpServers: { builder: { url: upstream.url } } }));
  });
  after(async () => {
    await upstream.close();
  });

  it('the task completes by re-attaching; the upstream tool ran once', { timeout: 120_000 }, async () => {
    const dir = tempDir();
    let server = await startHttpServer({ dir, extraArgs: ['-config', config] });
    let c = await connectHttp(server.url);
    let taskId;
    try {
      const tool = c.tools.find((t) => t.name === 'build');
      assert.ok(tool, `tools: ${c.tools.map((t) => t.name).join(', ')}`);
      assert.equal(tool.execution?.taskSupport, 'required', "the upstream's task support");
      const created = await startTask(c.client, 'build', {});
      taskId = created.taskId;
      assert.equal(upstream.runs(), 1, 'the upstream task exists when the create is answered');
      // The upstream's status message is the task's.
      await pollTask(c.client, taskId, (t) => t.statusMessage === 'building', { timeoutMs: 30_000 });
    } finally {
      await c.client.close();
    }

    await server.kill();
    assert.match(server.stderr(), /the upstream speaks tasks/);
    server = await startHttpServer({ dir, extraArgs: ['-config', config] });
    c = await connectHttp(server.url);
    try {
      const { task } = await pollTask(c.client, taskId, (t) => /re-attached to the task/.test(t.statusMessage ?? '') || t.statusMessage === 'building', { timeoutMs: 30_000 });
      assert.equal(task.status, 'working');
      upstream.release();
      const done = await pollTask(c.client, taskId, undefined, { timeoutMs: 60_000 });
      assert.equal(done.task.status, 'completed', `statuses ${done.statuses}; ${done.task.statusMessage}`);
      const result = await c.client.experimental.tasks.getTaskResult(taskId, CallToolResultSchema);
      assert.equal(textOf(result), 'built, run 1');
      assert.equal(upstream.runs(), 1, 'the upstream tool ran once');
    } finally {
      await c.close();
      const { code, stderr } = await server.stop();
      assert.equal(code, 0, `mcptaskd exited with code ${code}; stderr:\n${stderr}`);
      assert.doesNotMatch(stderr, /panic|level=ERROR/, `mcptaskd logged errors:\n${stderr}`);
    }
  });
});
