#!/usr/bin/env node
// A minimal MCP server over stdio (newline-delimited JSON-RPC, no SDK),
// for the sampling flow: mcptaskd's demo tools never sample, so mcptaskd's
// gateway runs this as an upstream (from a -config file) and re-exports its
// one tool, ask_model, as a task. ask_model sends sampling/createMessage
// to its client (the gateway), which makes the request the task's input
// (input_required) for the host's model to answer; the answer comes back
// as the tool's result. Requests it does not know get -32601 (the
// gateway's 2026-07-28 probe, if it sends one, falls back to initialize).

import { createInterface } from 'node:readline';

const send = (m) => process.stdout.write(JSON.stringify({ jsonrpc: '2.0', ...m }) + '\n');
const pending = new Map(); // our request id -> the tools/call id waiting on it
let seq = 0;

const tool = {
  name: 'ask_model',
  title: 'Ask the model',
  description: "Asks the client's model a question (sampling/createMessage) and returns its answer.",
  inputSchema: { type: 'object', properties: { question: { type: 'string' } }, required: ['question'] },
  outputSchema: { type: 'object', properties: { model: { type: 'string' }, answer: { type: 'string' } }, required: ['model', 'answer'] },
};

createInterface({ input: process.stdin }).on('line', (line) => {
  if (!line.trim()) return;
  let m;
  try {
    m = JSON.parse(line);
  } catch {
    return;
  }
  // An answer to our sampling request.
  if (m.method === undefined && m.id !== undefined && pending.has(m.id)) {
    const callId = pending.get(m.id);
    pending.delete(m.id);
    if (m.error) {
      send({ id: callId, result: { content: [{ type: 'text', text: `sampling failed: ${m.error.message}` }], isError: true } });
      return;
    }
    const c = Array.isArray(m.result.content) ? m.result.content[0] : m.result.content;
    const answer = c?.type === 'text' ? c.text : JSON.stringify(c);
    send({ id: callId, result: { content: [{ type: 'text', text: `the model said: ${answer}` }], structuredContent: { model: m.result.model, answer } } });
    return;
  }
  if (m.id === undefined) return; // a notification
  switch (m.method) {
    case 'initialize':
      send({ id: m.id, result: { protocolVersion: m.params?.protocolVersion ?? '2025-11-25', capabilities: { tools: {} }, serverInfo: { name: 'sampler', version: '1.0.0' } } });
      return;
    case 'ping':
      send({ id: m.id, result: {} });
      return;
    case 'tools/list':
      send({ id: m.id, result: { tools: [tool] } });
      return;
    case 'tools/call': {
      if (m.params?.name !== 'ask_model') {
        send({ id: m.id, error: { code: -32602, message: `unknown tool ${m.params?.name}` } });
        return;
      }
      const id = `sampler-${++seq}`;
      pending.set(id, m.id);
      send({
        id,
        method: 'sampling/createMessage',
        params: {
          messages: [{ role: 'user', content: { type: 'text', text: String(m.params.arguments?.question ?? '') } }],
          maxTokens: 50,
        },
      });
      return;
    }
    default:
      send({ id: m.id, error: { code: -32601, message: `method not found: ${m.method}` } });
  }
});
