// Self-test of the webhook receiver (lib/receiver.mjs and bin/receiver.mjs):
// requests are signed with the standardwebhooks library's own Webhook.sign,
// so a good request is one the reference library made, and a bad one is a
// good one altered after signing.

import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { randomBytes, randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { Webhook } from 'standardwebhooks';
import { startReceiver } from '../lib/receiver.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const bin = resolve(here, '../bin/receiver.mjs');

const newSecret = () => `whsec_${randomBytes(24).toString('base64')}`;

function event(n = 1) {
  return {
    eventId: `evt-${n}`,
    name: 'task.status',
    timestamp: new Date().toISOString(),
    data: { taskId: `task-${n}`, status: 'completed' },
    cursor: `c${n}`,
  };
}

// post signs payload (a string, sent byte for byte) with the library and
// POSTs it; tweak may alter the headers and body after signing.
async function post(url, secret, payload, { id = `msg_${randomUUID()}`, date = new Date(), sub = 'sub-1', tweak } = {}) {
  const body = typeof payload === 'string' ? payload : JSON.stringify(payload);
  const headers = {
    'content-type': 'application/json',
    'webhook-id': id,
    'webhook-timestamp': String(Math.floor(date.getTime() / 1000)),
    'webhook-signature': new Webhook(secret).sign(id, date, body),
    'x-mcp-subscription-id': sub,
  };
  const req = { headers, body };
  tweak?.(req);
  const res = await fetch(url, { method: 'POST', headers: req.headers, body: req.body });
  const text = await res.text();
  return { status: res.status, text, json: text ? JSON.parse(text) : undefined };
}

const readLines = (file) =>
  readFileSync(file, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l));

describe('startReceiver', () => {
  const secret = newSecret();
  let dir, file, r;
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'webhooks-'));
    file = join(dir, 'deliveries.jsonl');
    r = await startReceiver({ secret, file });
  });
  after(async () => {
    await r.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('listens on loopback', () => {
    assert.match(r.url, /^http:\/\/127\.0\.0\.1:\d+\/hook$/);
  });

  it('accepts a delivery the library signed and records it', async () => {
    const ev = event(1);
    const res = await post(r.url, secret, ev, { id: 'msg_one', sub: 'sub-42' });
    assert.equal(res.status, 200);
    assert.equal(r.deliveries.length, 1);
    const d = r.deliveries[0];
    assert.equal(d.kind, 'delivery');
    assert.equal(d.webhookId, 'msg_one');
    assert.equal(d.subscriptionId, 'sub-42');
    assert.deepEqual(d.body, ev);
    const lines = readLines(file).filter((l) => l.kind === 'delivery');
    assert.deepEqual(lines, [d]);
  });

  it('verifies the raw bytes (whitespace and key order kept as sent)', async () => {
    const raw = '{ "name":"task.status",  "eventId":"evt-raw", "data":{"x":1}, "timestamp":"2026-01-01T00:00:00Z"}';
    const res = await post(r.url, secret, raw);
    assert.equal(res.status, 200);
    assert.equal(r.deliveries.at(-1).body.eventId, 'evt-raw');
  });

  it('refuses a tampered body with 401 and records the rejection', async () => {
    const before = r.deliveries.length;
    const res = await post(r.url, secret, event(2), {
      id: 'msg_tampered',
      tweak: (req) => {
        req.body = req.body.replace('completed', 'failed');
      },
    });
    assert.equal(res.status, 401);
    assert.equal(r.deliveries.length, before);
    const rej = r.rejected.find((x) => x.webhookId === 'msg_tampered');
    assert.ok(rej, JSON.stringify(r.rejected));
    assert.match(rej.error, /signature/i);
    assert.equal(rej.body, undefined);
  });

  it('refuses a wrong secret, a changed webhook-id and missing headers', async () => {
    for (const tweak of [
      (req) => {
        req.headers['webhook-signature'] = new Webhook(newSecret()).sign(req.headers['webhook-id'], new Date(), req.body);
      },
      (req) => {
        req.headers['webhook-id'] = 'msg_other';
      },
      (req) => {
        delete req.headers['webhook-signature'];
      },
    ]) {
      const res = await post(r.url, secret, event(3), { tweak });
      assert.equal(res.status, 401);
    }
    assert.ok(!r.deliveries.some((d) => d.body.eventId === 'evt-3'));
  });

  it('refuses a timestamp more than 5 minutes off', async () => {
    for (const skew of [-6 * 60_000, 6 * 60_000]) {
      const res = await post(r.url, secret, event(4), { date: new Date(Date.now() + skew) });
      assert.equal(res.status, 401, `skew ${skew}`);
    }
    assert.ok(r.rejected.some((x) => /too old/.test(x.error)));
    assert.ok(r.rejected.some((x) => /too new/.test(x.error)));
  });

  it('accepts any of several signatures (secret rotation)', async () => {
    const res = await post(r.url, secret, event(5), {
      tweak: (req) => {
        const old = new Webhook(newSecret()).sign(req.headers['webhook-id'], new Date(), req.body);
        req.headers['webhook-signature'] = `${old} ${req.headers['webhook-signature']}`;
      },
    });
    assert.equal(res.status, 200);
    assert.equal(r.deliveries.at(-1).body.eventId, 'evt-5');
  });

  it('echoes a verification challenge', async () => {
    const challenge = randomBytes(16).toString('hex');
    const res = await post(r.url, secret, { type: 'verification', challenge }, { sub: 'sub-v' });
    assert.equal(res.status, 200);
    assert.deepEqual(res.json, { challenge });
    assert.equal(r.verifications.at(-1).subscriptionId, 'sub-v');
    assert.ok(!r.deliveries.some((d) => d.body.type === 'verification'));
  });

  it('does not echo an unsigned verification challenge', async () => {
    const res = await post(r.url, secret, { type: 'verification', challenge: 'x' }, {
      tweak: (req) => {
        req.headers['webhook-signature'] = 'v1,AAAA';
      },
    });
    assert.equal(res.status, 401);
    assert.equal(res.text, '');
  });

  it('records gap and terminated envelopes as deliveries', async () => {
    assert.equal((await post(r.url, secret, { type: 'gap', cursor: 'c9' })).status, 200);
    assert.equal((await post(r.url, secret, { type: 'terminated', error: { code: -32001, message: 'gone' } })).status, 200);
    assert.deepEqual(r.deliveries.slice(-2).map((d) => d.body.type), ['gap', 'terminated']);
  });

  it('dedupes on webhook-id: 2xx again, recorded once', async () => {
    const ev = event(6);
    assert.equal((await post(r.url, secret, ev, { id: 'msg_dup' })).status, 200);
    assert.equal((await post(r.url, secret, ev, { id: 'msg_dup' })).status, 200);
    assert.equal(r.deliveries.filter((d) => d.webhookId === 'msg_dup').length, 1);
    assert.equal(r.duplicates.filter((d) => d.webhookId === 'msg_dup').length, 1);
  });

  it('answers 405 to other methods', async () => {
    const res = await fetch(r.url);
    assert.equal(res.status, 405);
  });
});

describe('startReceiver options', () => {
  it('failFirst: 500 to the first deliveries, then accepts the redelivery', async () => {
    const secret = newSecret();
    const r = await startReceiver({ secret, failFirst: 2 });
    try {
      // A verification is not counted as a delivery to fail.
      assert.equal((await post(r.url, secret, { type: 'verification', challenge: 'n' })).status, 200);
      const ev = event(7);
      assert.equal((await post(r.url, secret, ev, { id: 'msg_retry' })).status, 500);
      assert.equal((await post(r.url, secret, ev, { id: 'msg_retry' })).status, 500);
      assert.equal((await post(r.url, secret, ev, { id: 'msg_retry' })).status, 200);
      assert.equal(r.failed.length, 2);
      assert.deepEqual(r.deliveries.map((d) => d.webhookId), ['msg_retry']);
    } finally {
      await r.close();
    }
  });

  it('status: a non-2xx status records nothing as accepted', async () => {
    const secret = newSecret();
    const r = await startReceiver({ secret, status: 410 });
    try {
      assert.equal((await post(r.url, secret, event(8))).status, 410);
      assert.equal(r.deliveries.length, 0);
      assert.equal(r.failed[0].status, 410);
    } finally {
      await r.close();
    }
  });

  it('wrongEcho and delayMs', async () => {
    const secret = newSecret();
    const r = await startReceiver({ secret, wrongEcho: true, delayMs: 150 });
    try {
      const t0 = Date.now();
      const res = await post(r.url, secret, { type: 'verification', challenge: 'abc' });
      assert.ok(Date.now() - t0 >= 140, 'answered without the delay');
      assert.equal(res.status, 200);
      assert.notEqual(res.json.challenge, 'abc');
    } finally {
      await r.close();
    }
  });

  it('needs a secret', async () => {
    await assert.rejects(startReceiver({}), /secret/);
  });
});

describe('bin/receiver.mjs', () => {
  it('prints its URL, writes JSON lines, exits 0 on SIGTERM', { timeout: 30_000 }, async () => {
    const secret = newSecret();
    const dir = mkdtempSync(join(tmpdir(), 'webhooks-cli-'));
    const out = join(dir, 'out.jsonl');
    const child = spawn(process.execPath, [bin, '--secret', secret, '--out', out, '--fail-first', '1'], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (d) => (stderr += d));
    try {
      const url = await new Promise((resolve, reject) => {
        let buf = '';
        child.stdout.on('data', (d) => {
          buf += d;
          const m = /^listening (\S+)\n/m.exec(buf);
          if (m) resolve(m[1]);
        });
        child.once('exit', (code) => reject(new Error(`receiver exited ${code} before listening: ${stderr}`)));
      });
      assert.match(url, /^http:\/\/127\.0\.0\.1:\d+\/hook$/);
      const ev = event(9);
      assert.equal((await post(url, secret, ev, { id: 'msg_cli' })).status, 500);
      assert.equal((await post(url, secret, ev, { id: 'msg_cli' })).status, 200);
      assert.equal((await post(url, secret, ev, { tweak: (req) => (req.body += ' ') })).status, 401);
      // Written before the 200 was sent.
      const lines = readLines(out);
      assert.deepEqual(lines.map((l) => l.kind), ['failed', 'delivery', 'rejected']);
      assert.deepEqual(lines[1].body, ev);
      assert.equal(lines[1].subscriptionId, 'sub-1');
      assert.doesNotMatch(readFileSync(out, 'utf8') + stderr, new RegExp(secret.slice(6, 20).replace(/[+/]/g, '\\$&')));
    } finally {
      let code = child.exitCode;
      let signal = child.signalCode;
      if (code === null && signal === null) {
        const exited = once(child, 'exit');
        child.kill('SIGTERM');
        [code, signal] = await exited;
      }
      rmSync(dir, { recursive: true, force: true });
      assert.equal(code, 0, `exit ${code} ${signal}; stderr: ${stderr}`);
    }
  });

  it('exits 2 without a secret', async () => {
    const child = spawn(process.execPath, [bin, '--out', join(tmpdir(), 'unused.jsonl')], {
      stdio: 'ignore',
      env: { ...process.env, MCPTASK_WEBHOOK_SECRET: '' },
    });
    const [code] = await once(child, 'exit');
    assert.equal(code, 2);
  });
});
