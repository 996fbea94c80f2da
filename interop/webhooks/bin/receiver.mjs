#!/usr/bin/env node
// The webhook receiver of lib/receiver.mjs as a process, for tests in
// other languages (the Go tests run it as a child process):
//
//   node bin/receiver.mjs --secret whsec_... --out FILE [--fail-first N]
//        [--status CODE] [--delay-ms MS] [--wrong-echo]
//
// The secret may come from MCPTASK_WEBHOOK_SECRET instead of --secret.
// Once listening it prints one line on stdout:
//
//   listening http://127.0.0.1:PORT/hook
//
// and then appends one JSON line to FILE per request it handled (kind
// "delivery", "duplicate", "verification", "failed" or "rejected"; see
// lib/receiver.mjs), each written before the request is answered. It exits
// 0 on SIGTERM or SIGINT, 2 on a usage error.

import { parseArgs } from 'node:util';
import { writeFileSync } from 'node:fs';
import { startReceiver } from '../lib/receiver.mjs';

function usage(msg) {
  process.stderr.write(
    `receiver: ${msg}\n` +
      'usage: node bin/receiver.mjs --secret whsec_... --out FILE [--fail-first N] [--status CODE] [--delay-ms MS] [--wrong-echo]\n',
  );
  process.exit(2);
}

let values;
try {
  ({ values } = parseArgs({
    options: {
      secret: { type: 'string' },
      out: { type: 'string' },
      'fail-first': { type: 'string', default: '0' },
      status: { type: 'string', default: '200' },
      'delay-ms': { type: 'string', default: '0' },
      'wrong-echo': { type: 'boolean', default: false },
    },
    strict: true,
    allowPositionals: false,
  }));
} catch (e) {
  usage(e.message);
}

const secret = values.secret ?? process.env.MCPTASK_WEBHOOK_SECRET;
if (!secret) usage('--secret (or MCPTASK_WEBHOOK_SECRET) is required');
if (!values.out) usage('--out is required');
const int = (name) => {
  const v = values[name];
  if (!/^\d+$/.test(v)) usage(`--${name} wants a non-negative integer, got ${JSON.stringify(v)}`);
  return Number(v);
};
const failFirst = int('fail-first');
const status = int('status');
const delayMs = int('delay-ms');
if (status < 100 || status > 599) usage(`--status wants an HTTP status, got ${status}`);

// Start with an empty file, so a reader never sees an older run's lines.
writeFileSync(values.out, '');

let receiver;
try {
  receiver = await startReceiver({ secret, file: values.out, failFirst, status, delayMs, wrongEcho: values['wrong-echo'] });
} catch (e) {
  // A bad secret (not base64) lands here; the message does not contain it.
  process.stderr.write(`receiver: ${e.message}\n`);
  process.exit(2);
}

let stopping = false;
const stop = async () => {
  if (stopping) return;
  stopping = true;
  await receiver.close();
  process.exit(0);
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);

process.stdout.write(`listening ${receiver.url}\n`);
