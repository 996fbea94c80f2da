// A recording reverse proxy on 127.0.0.1 in front of mcptaskd's
// Streamable HTTP endpoint: every client in the matrix talks to the proxy,
// which forwards each request unchanged and records what the client sent
// (time, HTTP method, headers, the JSON-RPC messages of the body) and what
// the server answered (status, content type, the JSON-RPC messages of a
// JSON body or of an SSE stream, each with the time it passed). The tests
// read the record to measure a client's gaps between tasks/get polls, to
// see which messages went on which stream, and to describe a client's
// behaviour in docs/interop.md; the record is the client's own traffic, so
// it holds for clients the tests drive as separate processes (the
// Inspector's CLI) as well as in-process ones.

import http from 'node:http';
import { once } from 'node:events';

/**
 * @typedef {object} Exchange
 * @property {number} t              when the request arrived (ms, Date.now())
 * @property {string} httpMethod     POST, GET, DELETE
 * @property {Record<string, string|string[]|undefined>} headers  the request's headers
 * @property {object[]} sent         the JSON-RPC messages of the request body
 * @property {number} [status]       the HTTP status of the answer
 * @property {string} [contentType]
 * @property {{t: number, msg: object}[]} received  JSON-RPC messages of the answer, as they passed
 * @property {boolean} done          the answer ended
 */

/**
 * startRecorder starts the proxy in front of target (an http://127.0.0.1
 * URL) and resolves with its URL (same path) and the record.
 *
 * With holdFirstSessionGet, the answer's headers of the first GET that
 * carries a session ID are held back until the answer to the client's
 * notifications/initialized has passed and the client has sent its next
 * request (another GET or a POST): a fault that reorders the two answers as
 * a slow network or a loaded machine may (the server holds the GET stream
 * already; only the client learns of it late).
 *
 * @param {string} target
 * @param {{holdFirstSessionGet?: boolean}} [opts]
 * @returns {Promise<{url: string, exchanges: Exchange[], close: () => Promise<void>, requests: (method: string) => Exchange[]}>}
 */
export async function startRecorder(target, { holdFirstSessionGet = false } = {}) {
  const t = new URL(target);
  if (t.hostname !== '127.0.0.1') throw new Error(`recorder: target ${target} is not on loopback`);
  /** @type {Exchange[]} */
  const exchanges = [];
  const sockets = new Set();
  // held: null while the first session GET is awaited, then its release
  // until called; undefined when nothing is (or will be) held.
  let held = holdFirstSessionGet ? null : undefined;
  let initializedAnswered = false;
  const release = () => {
    const h = held;
    held = undefined;
    if (typeof h === 'function') h();
  };

  const server = http.createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const ex = { t: Date.now(), httpMethod: req.method, headers: { ...req.headers }, sent: parseBody(body), received: [], done: false };
      exchanges.push(ex);
      if (typeof held === 'function' && initializedAnswered && (req.method === 'POST' || (req.method === 'GET' && req.headers['mcp-session-id']))) release();
      const up = http.request(
        { host: t.hostname, port: t.port, path: req.url, method: req.method, headers: req.headers },
        (ur) => {
          if (held === null && req.method === 'GET' && req.headers['mcp-session-id']) {
            held = () => answer(ur);
            return;
          }
          answer(ur);
        },
      );
      const answer = (ur) => {
          ex.status = ur.statusCode;
          ex.contentType = String(ur.headers['content-type'] ?? '');
          res.writeHead(ur.statusCode ?? 502, ur.headers);
          const sse = ex.contentType.startsWith('text/event-stream');
          let buf = '';
          ur.on('data', (c) => {
            res.write(c);
            buf += c.toString('utf8');
            if (sse) {
              // Events end with a blank line; each data: line is a message.
              let i;
              while ((i = buf.search(/\r?\n\r?\n/)) >= 0) {
                const ev = buf.slice(0, i);
                buf = buf.slice(i).replace(/^\r?\n\r?\n/, '');
                const data = ev
                  .split(/\r?\n/)
                  .filter((l) => l.startsWith('data:'))
                  .map((l) => l.slice(5).replace(/^ /, ''))
                  .join('\n');
                if (data) pushParsed(ex, data);
              }
            }
          });
          ur.on('end', () => {
            if (!sse && buf) pushParsed(ex, buf);
            ex.done = true;
            res.end();
            if (ex.sent.some((m) => m.method === 'notifications/initialized')) initializedAnswered = true;
          });
          ur.on('error', () => {
            ex.done = true;
            res.destroy();
          });
      };
      up.on('error', (e) => {
        ex.status = 502;
        ex.done = true;
        if (!res.headersSent) res.writeHead(502, { 'content-type': 'text/plain' });
        res.end(String(e));
      });
      // The client went away (closed its stream): close the upstream side too.
      res.on('close', () => up.destroy());
      up.end(body);
    });
  });
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address();
  const url = `http://127.0.0.1:${port}${t.pathname}`;
  return {
    url,
    exchanges,
    /** requests(method): the POSTs whose body holds a request of that JSON-RPC method. */
    requests: (method) => exchanges.filter((e) => e.sent.some((m) => m.method === method && m.id !== undefined)),
    close: async () => {
      for (const s of sockets) s.destroy();
      release();
      server.close();
      await once(server, 'close').catch(() => {});
    },
  };
}

function parseBody(body) {
  if (body.length === 0) return [];
  try {
    const v = JSON.parse(body.toString('utf8'));
    return Array.isArray(v) ? v : [v];
  } catch {
    return [];
  }
}

function pushParsed(ex, text) {
  try {
    const v = JSON.parse(text);
    for (const m of Array.isArray(v) ? v : [v]) ex.received.push({ t: Date.now(), msg: m });
  } catch {
    // not JSON (an error page): keep nothing
  }
}

/**
 * pollGaps returns the gaps (ms) between the consecutive tasks/get
 * requests for taskId in the record, in order.
 */
export function pollGaps(exchanges, taskId, method = 'tasks/get') {
  const times = exchanges
    .filter((e) => e.sent.some((m) => m.method === method && m.params?.taskId === taskId))
    .map((e) => e.t);
  return times.slice(1).map((t, i) => t - times[i]);
}

/**
 * pollRecord returns, in order, the requests that followed taskId on the
 * record (the tools/call that created it, then each tasks/get), each with
 * its time and the poll interval the server's answer suggested (2026:
 * pollIntervalMs, 2025: pollInterval; the create answer's too).
 */
export function pollRecord(exchanges, taskId) {
  const out = [];
  for (const e of exchanges) {
    const req = e.sent.find((m) => m.id !== undefined && (m.method === 'tasks/get' || m.method === 'tools/call'));
    if (!req) continue;
    const reply = e.received.map((r) => r.msg).find((m) => m.id === req.id && m.result);
    const r = reply?.result;
    const t = r?.task ?? r; // 2025 CreateTaskResult{task} or a flat task
    if (req.method === 'tasks/get' && req.params?.taskId !== taskId) continue;
    if (req.method === 'tools/call' && t?.taskId !== taskId) continue;
    out.push({ t: e.t, method: req.method, status: t?.status, pollInterval: t?.pollIntervalMs ?? t?.pollInterval });
  }
  return out;
}

/**
 * checkPollGaps asserts that every tasks/get of the record came at least
 * the poll interval after the previous request on the task (less slackMs
 * for timer granularity) and returns the gaps.
 */
export function pollGapsChecked(exchanges, taskId, { slackMs = 5 } = {}) {
  const rec = pollRecord(exchanges, taskId);
  const gaps = [];
  const violations = [];
  for (let i = 1; i < rec.length; i++) {
    if (rec[i].method !== 'tasks/get') continue;
    const gap = rec[i].t - rec[i - 1].t;
    const want = rec[i - 1].pollInterval;
    gaps.push({ gap, want });
    if (want !== undefined && gap < want - slackMs) violations.push({ i, gap, want });
  }
  return { rec, gaps, violations };
}
