// Sampling, where a client can answer it: the v2 client with ext-tasks on
// both wires answers a task's sampling/createMessage through the library's
// onInputRequest (2026-07-28: an inputRequests entry answered with
// tasks/update; 2025-11-25: the server request mcptaskd sends on the
// session's GET stream). mcptaskd's demo tools never sample, so the task is
// the gateway's re-export of lib/sampler.mjs (a small stdio upstream) whose
// tool asks the client's model. The Inspector CLI declares no sampling and
// @ai-sdk/mcp has no sampling handler (docs/interop.md: cannot).

import { describe, before, after, it } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join, resolve, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { connectV2, sortErrors, textOf, WIRE_2025, WIRE_2026 } from '../lib/v2client.mjs';
import { startServer, tempDir, withDeadline } from '../lib/harness.mjs';

const sampler = resolve(dirname(fileURLToPath(import.meta.url)), '../lib/sampler.mjs');

describe('sampling through a task (gateway before a sampling upstream)', () => {
  let srv;
  before(async () => {
    const config = join(tempDir(), 'mcptaskd.json');
    writeFileSync(config, JSON.stringify({ demo: false, mcpServers: { sampler: { command: process.execPath, args: [sampler], task: 'optional' } } }));
    srv = await startServer({ extraArgs: ['-config', config] });
  });
  after(async () => {
    await srv?.stop();
  });

  for (const wire of [WIRE_2026, WIRE_2025]) {
    it(`v2 client + ext-tasks, ${wire}: the model's answer is the task's result`, { timeout: 30_000 }, async (t) => {
      const c = await connectV2(srv.url, { wire, sampling: true });
      try {
        assert.ok(c.tools.some((t) => t.name === 'ask_model'), `tools: ${c.tools.map((t) => t.name)}`);
        c.sample = () => ({ model: 'interop-model', role: 'assistant', content: { type: 'text', text: '42' } });
        const ex = await c.session.callTool('ask_model', { question: 'what is six times seven?' }, { task: { preference: 'require' } });
        assert.equal(ex.kind, 'task');
        const { outcome } = await withDeadline(ex.settle(), 20_000, 'ask_model');
        assert.equal(outcome.status, 'completed', outcome.error?.message);
        assert.equal(textOf(outcome.result), 'the model said: 42');
        assert.deepEqual(outcome.result.structuredContent, { model: 'interop-model', answer: '42' });
        assert.equal(c.samplings.length, 1, 'asked once');
        const { request, context } = c.samplings[0];
        assert.equal(request.kind, 'sampling');
        assert.deepEqual(request.params.messages, [{ role: 'user', content: { type: 'text', text: 'what is six times seven?' } }]);
        assert.equal(request.params.maxTokens, 50);
        assert.equal(context.taskId, ex.handle.taskId);
        assert.equal(context.delivery, wire === WIRE_2026 ? 'task-update' : 'peer-request');
        assert.deepEqual(sortErrors(c, srv.rec.exchanges).unexpected.map(String), []);
      } finally {
        await c.close();
      }
    });
  }
});
