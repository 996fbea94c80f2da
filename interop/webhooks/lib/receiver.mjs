// A webhook receiver for mcptaskd's MCP Events webhook delivery, built on
// the Standard Webhooks reference library (npm `standardwebhooks`, pinned
// in package.json): a third party's verifier checks what mcptaskd signs.
//
// Every POST is verified with the library's Webhook class over the raw body
// (headers webhook-id, webhook-timestamp, webhook-signature; a timestamp
// more than 5 minutes off is refused by the library) before anything is
// parsed. Then:
//
//   - {"type":"verification","challenge":C}: answered 200 with
//     {"challenge":C} (with wrongEcho, a different value), recorded in
//     `verifications`;
//   - anything else (an EventOccurrence, or a "gap" / "terminated" control
//     envelope): a delivery. The first `failFirst` deliveries are answered
//     500 and not recorded (`failed`); after that a delivery whose
//     webhook-id was already accepted is answered 200 and not recorded
//     again (`duplicates`); otherwise it is recorded in `deliveries` (and
//     appended to `file`) and then answered `status`. A non-2xx `status`
//     records the attempt in `failed` instead (the receiver did not take
//     it).
//
// A request that fails verification is answered 401 (400 if the verified
// body is not JSON, 413 if it is too large) and recorded in `rejected`.
//
// With `file`, each of these outcomes is appended as one JSON line, written
// synchronously before the answer is sent, so a reader of the file sees a
// delivery no later than the sender sees its 2xx:
//
//   {"kind":"delivery"|"duplicate"|"verification"|"failed"|"rejected",
//    "webhookId":..., "subscriptionId":..., "webhookTimestamp":...,
//    "receivedAt":"RFC 3339", "status":200, "body":{...}, "error":"..."}
//
// ("body" is absent for "rejected" lines, "error" present only there).

import { createServer } from 'node:http';
import { appendFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { Webhook } from 'standardwebhooks';

/** The largest body accepted (bytes); larger ones are answered 413. */
export const MAX_BODY = 1 << 20;

/** The path of the URL returned by startReceiver (any path is accepted). */
export const PATH = '/hook';

/**
 * One recorded request.
 *
 * @typedef {object} Record
 * @property {string} kind              delivery, duplicate, verification, failed or rejected
 * @property {string} webhookId         the webhook-id header
 * @property {string} subscriptionId    the X-MCP-Subscription-Id header ('' when absent)
 * @property {string} webhookTimestamp  the webhook-timestamp header
 * @property {string} receivedAt        when it arrived (RFC 3339)
 * @property {number} status            the HTTP status answered
 * @property {object} [body]            the parsed JSON body (verified requests)
 * @property {string} [error]           why it was rejected
 */

/**
 * Starts a receiver on 127.0.0.1, port 0.
 *
 * @param {object} opts
 * @param {string} opts.secret        the whsec_ secret given to the server
 * @param {string} [opts.file]        append each outcome as a JSON line here
 * @param {number} [opts.failFirst]   answer 500 to this many first deliveries
 * @param {number} [opts.status]      the status for accepted deliveries (default 200)
 * @param {number} [opts.delayMs]     wait this long before handling each verified request
 * @param {boolean} [opts.wrongEcho]  answer verification challenges with a wrong value
 * @returns {Promise<{url: string, deliveries: Record[], duplicates: Record[],
 *   failed: Record[], rejected: Record[], verifications: Record[],
 *   close: () => Promise<void>}>}
 */
export async function startReceiver({ secret, file, failFirst = 0, status = 200, delayMs = 0, wrongEcho = false } = {}) {
  if (!secret) throw new Error('startReceiver: a secret is needed');
  const wh = new Webhook(secret);
  const deliveries = [];
  const duplicates = [];
  const failed = [];
  const rejected = [];
  const verifications = [];
  const seen = new Set();
  let toFail = failFirst;

  const record = (list, rec) => {
    list.push(rec);
    if (file) appendFileSync(file, JSON.stringify(rec) + '\n');
  };

  const server = createServer(async (req, res) => {
    const answer = (code, body) => {
      if (body === undefined) {
        res.writeHead(code).end();
      } else {
        const text = JSON.stringify(body);
        res.writeHead(code, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) }).end(text);
      }
    };
    const base = () => ({
      webhookId: header(req, 'webhook-id'),
      subscriptionId: header(req, 'x-mcp-subscription-id'),
      webhookTimestamp: header(req, 'webhook-timestamp'),
      receivedAt: new Date().toISOString(),
    });
    try {
      if (req.method !== 'POST') {
        res.setHeader('allow', 'POST');
        return answer(405);
      }
      const raw = await readBody(req);
      if (raw === null) {
        record(rejected, { kind: 'rejected', ...base(), status: 413, error: `body over ${MAX_BODY} bytes` });
        res.setHeader('connection', 'close');
        return answer(413);
      }
      // Verify the raw bytes first; parse only what is authentic.
      try {
        wh.verify(raw, req.headers, { jsonParse: false });
      } catch (e) {
        record(rejected, { kind: 'rejected', ...base(), status: 401, error: String(e?.message ?? e) });
        return answer(401);
      }
      let body;
      try {
        body = JSON.parse(raw.toString('utf8'));
      } catch (e) {
        record(rejected, { kind: 'rejected', ...base(), status: 400, error: `body is not JSON: ${e.message}` });
        return answer(400);
      }
      if (delayMs > 0) await sleep(delayMs);
      const rec = base();

      if (body?.type === 'verification') {
        const challenge = String(body.challenge ?? '');
        record(verifications, { kind: 'verification', ...rec, status: 200, body });
        return answer(200, { challenge: wrongEcho ? `wrong-${challenge}` : challenge });
      }
      if (toFail > 0) {
        toFail--;
        record(failed, { kind: 'failed', ...rec, status: 500, body });
        return answer(500, { error: 'failing on purpose (failFirst)' });
      }
      if (seen.has(rec.webhookId)) {
        record(duplicates, { kind: 'duplicate', ...rec, status: 200, body });
        return answer(200);
      }
      if (status < 200 || status > 299) {
        record(failed, { kind: 'failed', ...rec, status, body });
        return answer(status);
      }
      seen.add(rec.webhookId);
      record(deliveries, { kind: 'delivery', ...rec, status, body });
      return answer(status);
    } catch (e) {
      if (!res.headersSent) answer(500, { error: String(e?.message ?? e) });
    }
  });

  await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  const { port } = server.address();

  return {
    url: `http://127.0.0.1:${port}${PATH}`,
    deliveries,
    duplicates,
    failed,
    rejected,
    verifications,
    close: () =>
      new Promise((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

function header(req, name) {
  const v = req.headers[name];
  return Array.isArray(v) ? v.join(', ') : (v ?? '');
}

// readBody returns the raw request body, or null past MAX_BODY.
async function readBody(req) {
  const chunks = [];
  let n = 0;
  for await (const chunk of req) {
    n += chunk.length;
    if (n > MAX_BODY) return null;
    chunks.push(chunk);
  }
  return Buffer.concat(chunks);
}
