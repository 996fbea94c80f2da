// mcptaskd as a tasks gateway in front of a real upstream no one here
// wrote: @modelcontextprotocol/server-everything (the exact version pinned
// in package.json), started by mcptaskd over stdio from its -config file.
// The TypeScript SDK client calls the upstream's slow tool as a task on
// the 2025-11-25 wire (the upstream has no tasks of its own), sees its
// progress as the task's status message, and answers the upstream's
// elicitation and sampling requests through the task.

import { describe, before, after, it } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join, resolve, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { CallToolResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { startHttpServer, tempDir } from '../lib/server.mjs';
import { connectHttp, pollTask, startTask, textOf, TERMINAL } from '../lib/client.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const everything = resolve(here, '../node_modules/@modelcontextprotocol/server-everything/dist/index.js');

describe('gateway in front of server-everything', () => {
  let server;
  before(async () => {
    const config = join(tempDir(), 'mcptaskd.json');
    writeFileSync(config, JSON.stringify({
      demo: false,
      mcpServers: { everything: { command: process.execPath, args: [everything, 'stdio'], task: 'optional' } },
    }));
    server = await startHttpServer({ extraArgs: ['-config', config], timeoutMs: 60_000 });
  });
  after(async () => {
    const { code, signal, stderr } = await server.stop();
    assert.equal(code, 0, `mcptaskd exited with code ${code} (signal ${signal}); stderr:\n${stderr}`);
    assert.doesNotMatch(stderr, /panic|level=ERROR/, `mcptaskd logged errors:\n${stderr}`);
  });

  it("the upstream's tools are listed with task support", { timeout: 60_000 }, async () => {
    const c = await connectHttp(server.url);
    try {
      const tool = c.tools.find((t) => t.name === 'trigger-long-running-operation');
      assert.ok(tool, `tools: ${c.tools.map((t) => t.name).join(', ')}`);
      assert.equal(tool.execution?.taskSupport, 'optional');
    } finally {
      await c.close();
    }
  });

  it('a long-running operation runs as a task, its progress the status message', { timeout: 120_000 }, async () => {
    const c = await connectHttp(server.url);
    try {
      const created = await startTask(c.client, 'trigger-long-running-operation', { duration: 2, steps: 4 });
      const messages = new Set();
      const { task, statuses } = await pollTask(c.client, created.taskId, (t) => {
        if (t.statusMessage) messages.add(t.statusMessage);
        return TERMINAL.has(t.status);
      }, { timeoutMs: 60_000 });
      assert.equal(task.status, 'completed', `statuses ${statuses}`);
      assert.ok([...messages].some((m) => /of 4/.test(m)), `status messages: ${[...messages].join(' | ')}`);
      const result = await c.client.experimental.tasks.getTaskResult(created.taskId, CallToolResultSchema);
      assert.match(textOf(result), /Long running operation completed/);
      assert.deepEqual(c.errors.map(String), []);
    } finally {
      await c.close();
    }
  });

  it("the upstream's elicitation is the task's input, answered by the client", { timeout: 120_000 }, async () => {
    const c = await connectHttp(server.url);
    try {
      c.answer = () => ({ action: 'decline' });
      const created = await startTask(c.client, 'trigger-elicitation-request', {});
      const result = await c.client.experimental.tasks.getTaskResult(created.taskId, CallToolResultSchema);
      assert.equal(c.elicitations.length, 1, 'the client was asked once');
      assert.match(textOf(result), /decline/i);
    } finally {
      await c.close();
    }
  });

  it("the upstream's sampling request is the task's input, answered by the client's model", { timeout: 120_000 }, async () => {
    const c = await connectHttp(server.url, { sampling: true });
    try {
      // server-everything registers trigger-sampling-request only for a
      // client that declares sampling: the gateway does, for its hosts.
      assert.ok(c.tools.some((t) => t.name === 'trigger-sampling-request'), `tools: ${c.tools.map((t) => t.name).join(', ')}`);
      c.sample = () => ({
        model: 'interop-model-9',
        role: 'assistant',
        stopReason: 'endTurn',
        content: { type: 'text', text: 'the sampled answer: 42' },
      });
      const created = await startTask(c.client, 'trigger-sampling-request', { prompt: 'what is six times seven?', maxTokens: 20 });
      // The upstream asked at once: the question reaches the client on
      // the session's GET stream (it has not called tasks/result yet), or
      // on tasks/result; the answer goes back upstream, whose result
      // quotes it.
      const result = await c.client.experimental.tasks.getTaskResult(created.taskId, CallToolResultSchema);
      assert.equal(c.samplings.length, 1, 'the client was asked once');
      const req = c.samplings[0].params;
      assert.equal(req.maxTokens, 20);
      assert.equal(req.systemPrompt, 'You are a helpful test server.');
      assert.match(req.messages[0].content.text, /what is six times seven\?/);
      assert.equal(req._meta?.['io.modelcontextprotocol/related-task']?.taskId, created.taskId, `_meta: ${JSON.stringify(req._meta)}`);
      assert.notEqual(result.isError, true, textOf(result));
      assert.match(textOf(result), /LLM sampling result/);
      assert.match(textOf(result), /the sampled answer: 42/);
      assert.match(textOf(result), /interop-model-9/);
      const done = await c.client.experimental.tasks.getTask(created.taskId);
      assert.equal(done.status, 'completed');
      assert.deepEqual(c.errors.map(String), []);
    } finally {
      await c.close();
    }
  });
});
