// A workflow (docs/workflows.md) with the TypeScript SDK 1.32.2 client on
// the 2025-11-25 wire, which knows nothing of child tasks: mcptaskd's
// `release` of lib/workflow.mjs (a → b ∥ c → d, each step a child task of
// a command) is an ordinary task: created by callToolStream, polled with
// getTask (its status message naming the running steps), its result
// fetched with getTaskResult.

import { describe, before, after, it } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { CallToolResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { startHttpServer, tempDir } from '../lib/server.mjs';
import { connectHttp, pollTask, startTask, textOf } from '../lib/client.mjs';
import { writeWorkflowConfig, checkReleaseStructured, CHILDREN, RELEASE_ARGS, RELEASE_TEXT } from '../lib/workflow.mjs';

describe('workflow as a task with the SDK client', () => {
  let server;
  let files;
  before(async () => {
    files = writeWorkflowConfig(tempDir());
    server = await startHttpServer({ extraArgs: ['-config', files.path] });
  });
  after(async () => {
    const { code, signal, stderr } = await server.stop();
    assert.equal(code, 0, `mcptaskd exited with code ${code} (signal ${signal}); stderr:\n${stderr}`);
    assert.doesNotMatch(stderr, /panic|level=ERROR/, `mcptaskd logged errors:\n${stderr}`);
  });

  it('release: polled while b and c run, then its result', { timeout: 60_000 }, async () => {
    const c = await connectHttp(server.url);
    try {
      assert.equal(c.client.isToolTaskRequired('release'), true);
      const created = await startTask(c.client, 'release', RELEASE_ARGS);
      assert.equal(created.status, 'working');

      const running = await pollTask(c.client, created.taskId, (t) => t.statusMessage === 'running b, c (1 of 4 steps ended)');
      assert.equal(running.task.status, 'working');
      writeFileSync(files.goUnit, '');
      writeFileSync(files.go, '');
      const { task, statuses } = await pollTask(c.client, created.taskId);
      assert.equal(task.status, 'completed', `statuses ${statuses}; ${task.statusMessage}`);
      assert.equal(task.statusMessage, '4 of 4 steps ended');
      // The SDK keeps the task's _meta: the children, for a host that
      // knows them (oldest first: b and c, started at once, in either order).
      assert.deepEqual(
        (task._meta?.[CHILDREN] ?? []).map((ch) => [ch.step, ch.tool, ch.status]).sort(),
        [['a', 'prepare', 'completed'], ['b', 'unit', 'completed'], ['c', 'e2e', 'completed'], ['d', 'ship', 'completed']],
      );

      const result = await c.client.experimental.tasks.getTaskResult(created.taskId, CallToolResultSchema);
      assert.ok(!result.isError);
      assert.equal(textOf(result), RELEASE_TEXT);
      checkReleaseStructured(assert, result.structuredContent);
      assert.deepEqual(c.errors.map(String), [], 'the SDK client reported errors (onerror)');
    } finally {
      await c.close();
    }
  });
});
