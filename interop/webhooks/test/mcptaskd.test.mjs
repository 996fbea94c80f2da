// mcptaskd's MCP Events webhooks, verified by a third party: the
// Standard Webhooks reference library (npm standardwebhooks 1.1.1) checks
// every delivery mcptaskd signs. An authenticated requester subscribes
// (events/subscribe, raw JSON-RPC on the 2026-07-28 wire) to its task
// status and to one task's outputs; the receiver answers the verification
// challenge, fails its first deliveries (mcptaskd retries them with the
// same webhook-id), and records the rest.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { startHttpServer, tempDir } from '../../ts/lib/server.mjs';
import { startReceiver } from '../lib/receiver.mjs';

const TOKEN = 'webhooks-interop-token-7d2e4a';

async function rpc(url, method, params, id) {
  const meta = {
    'io.modelcontextprotocol/protocolVersion': '2026-07-28',
    'io.modelcontextprotocol/clientInfo': { name: 'webhooks-interop', version: '1' },
    'io.modelcontextprotocol/clientCapabilities': {
      extensions: { 'io.modelcontextprotocol/tasks': {}, 'io.modelcontextprotocol/events': {} },
    },
  };
  const headers = {
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
    'mcp-protocol-version': '2026-07-28',
    'mcp-method': method,
    authorization: `Bearer ${TOKEN}`,
  };
  if (method === 'tools/call') headers['mcp-name'] = params.name;
  const res = await fetch(url, {
    method: 'POST',
    headers,
    body: JSON.stringify({ jsonrpc: '2.0', id, method, params: { ...params, _meta: meta } }),
  });
  const text = await res.text();
  let msg;
  if ((res.headers.get('content-type') ?? '').includes('text/event-stream')) {
    for (const line of text.split('\n')) {
      if (line.startsWith('data:')) {
        const m = JSON.parse(line.slice(5));
        if (m.id === id) msg = m;
      }
    }
  } else {
    msg = JSON.parse(text);
  }
  if (!msg) throw new Error(`${method}: no answer (HTTP ${res.status}): ${text}`);
  return msg;
}

async function until(cond, what, ms = 20_000) {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

test('mcptaskd webhook deliveries verify with standardwebhooks', async () => {
  const dir = tempDir();
  const tokens = join(dir, 'tokens.json');
  writeFileSync(tokens, JSON.stringify([{ token: TOKEN, principal: 'alice', tenant: 'acme' }]));
  const server = await startHttpServer({ dir, extraArgs: ['-tokens', tokens, '-webhooks', '-webhooks-allow-private'] });
  const secret = 'whsec_' + randomBytes(32).toString('base64');
  const rx = await startReceiver({ secret, failFirst: 2 });
  try {
    const sub = await rpc(server.url, 'events/subscribe', {
      name: 'task.status',
      arguments: { tool: 'long_computation' },
      delivery: { mode: 'webhook', url: rx.url, secret },
      ttlMs: 600000,
    }, 1);
    assert.equal(sub.error, undefined, JSON.stringify(sub.error));
    assert.match(sub.result.id, /^sub_/);
    assert.ok(rx.verifications.length >= 1, 'the endpoint was verified before any delivery');

    const call = await rpc(server.url, 'tools/call', {
      name: 'long_computation',
      arguments: { n: 3000, steps: 3, step_delay_ms: 100 },
    }, 2);
    assert.equal(call.error, undefined, JSON.stringify(call.error));
    const taskId = call.result.taskId;
    const src = call.result.eventSource;
    assert.equal(src.name, 'long_computation.output');
    assert.equal(src.input.taskId, taskId);

    const outs = await rpc(server.url, 'events/subscribe', {
      name: src.name,
      arguments: src.input,
      cursor: src.initialCursor,
      delivery: { mode: 'webhook', url: rx.url, secret },
    }, 3);
    assert.equal(outs.error, undefined, JSON.stringify(outs.error));

    const bodies = () => rx.deliveries.map((d) => d.body);
    await until(() => bodies().some((b) => b.data?.taskId === taskId && b.data?.status === 'completed'), 'the completion');
    await until(() => bodies().filter((b) => b.name === 'long_computation.output').length === 3, 'the 3 outputs');
    // A failed delivery is retried after its backoff (about a second),
    // possibly after the task's later events were delivered.
    await until(() => rx.failed.length >= 2 && rx.failed.every((f) => rx.deliveries.some((d) => d.webhookId === f.webhookId)),
      'the failed deliveries delivered again');

    assert.deepEqual(rx.rejected, [], 'every delivery verifies');
    assert.ok(rx.failed.length >= 2, 'the failed attempts were made');
    for (const d of rx.deliveries) {
      assert.equal(d.webhookId, d.body.eventId, 'webhook-id is the eventId');
      assert.ok([sub.result.id, outs.result.id].includes(d.subscriptionId));
      assert.equal(typeof d.body.cursor, 'string');
    }
    // Retried deliveries kept their webhook-id: each failed one arrived again.
    const ok = new Set(rx.deliveries.map((d) => d.webhookId));
    for (const f of rx.failed) assert.ok(ok.has(f.webhookId), `failed ${f.webhookId} was delivered later`);
    const steps = bodies().filter((b) => b.name === 'long_computation.output').map((b) => b.data.data.step).sort();
    assert.deepEqual(steps, [1, 2, 3]);

    const un = await rpc(server.url, 'events/unsubscribe', {
      name: 'task.status', arguments: { tool: 'long_computation' }, delivery: { url: rx.url },
    }, 4);
    assert.equal(un.error, undefined, JSON.stringify(un.error));
  } finally {
    await rx.close();
    await server.stop();
  }
});
