// Client-side helpers: a host-like SDK client connection (elicitation
// handler, error capture) and small task utilities on top of the SDK's
// experimental tasks API.

import assert from 'node:assert/strict';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { CallToolResultSchema, CreateMessageRequestSchema, ElicitRequestSchema, McpError, TaskStatusNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { stdioServerParams } from './server.mjs';

export const CLIENT_INFO = { name: 'mcptask-interop-ts', version: '1.0.0' };

/**
 * A connected SDK client plus what the tests observe around it.
 *
 * @typedef {object} Conn
 * @property {Client} client
 * @property {import('@modelcontextprotocol/sdk/shared/transport.js').Transport} transport
 * @property {string} kind            'http' or 'stdio'
 * @property {object[]} elicitations  the elicitation/create requests received
 * @property {object[]} statusNotes   the params of notifications/tasks/status received
 * @property {(req: object) => Promise<object>|object} answer  answers elicitation/create (settable)
 * @property {object[]} samplings     the sampling/createMessage requests received (with `sampling: true`)
 * @property {(req: object) => Promise<object>|object} sample  answers sampling/createMessage (settable)
 * @property {Error[]} errors         errors the client reported through onerror
 * @property {object[]} tools         the tools/list result (listTools is called on connect, as a host does)
 * @property {() => string} stderr    the server's stderr (stdio only; '' over HTTP)
 * @property {{method: string, contentType: string, body: Promise<string>}[]} [exchanges]
 *                                    HTTP only: the responses to tasks/result POSTs
 * @property {() => Promise<void>} close
 */

function newClient(conn, { sampling = false } = {}) {
  const client = new Client(CLIENT_INFO, {
    // A host that can show forms to its user; needed for elicitation/create.
    // With sampling, a host with a model: needed for sampling/createMessage.
    capabilities: { elicitation: { form: {} }, ...(sampling ? { sampling: {} } : {}) },
  });
  client.setRequestHandler(ElicitRequestSchema, async (req) => {
    conn.elicitations.push(req);
    return conn.answer(req);
  });
  if (sampling) {
    client.setRequestHandler(CreateMessageRequestSchema, async (req) => {
      conn.samplings.push(req);
      return conn.sample(req);
    });
  }
  // A host that shows task progress listens for status notifications; the
  // SDK validates them with its schema (a mismatch reaches onerror).
  client.setNotificationHandler(TaskStatusNotificationSchema, (n) => {
    conn.statusNotes.push(n.params);
  });
  client.onerror = (e) => conn.errors.push(e);
  return client;
}

function baseConn(kind, opts) {
  const conn = {
    kind,
    elicitations: [],
    samplings: [],
    statusNotes: [],
    errors: [],
    answer: () => {
      throw new McpError(-32603, 'this test did not expect an elicitation');
    },
    sample: () => {
      throw new McpError(-32603, 'this test did not expect a sampling request');
    },
    stderr: () => '',
  };
  conn.client = newClient(conn, opts);
  return conn;
}

/**
 * spyFetch wraps fetch for the SDK's HTTP transport: the response body of
 * each POST of a tasks/result request is also read into `exchanges`, so a
 * test can see what the server sent on that request's stream.
 */
function spyFetch(exchanges) {
  return async (url, init) => {
    const res = await fetch(url, init);
    let method;
    try {
      method = JSON.parse(init?.body ?? 'null')?.method;
    } catch {
      // not a single JSON-RPC message
    }
    if (init?.method !== 'POST' || method !== 'tasks/result' || !res.body) return res;
    const [mine, theirs] = res.body.tee();
    exchanges.push({ method, contentType: res.headers.get('content-type'), body: new Response(mine).text() });
    return new Response(theirs, { status: res.status, statusText: res.statusText, headers: res.headers });
  };
}

/**
 * connectHttp opens a session on a Streamable HTTP server; with
 * `{ sampling: true }` the client also declares sampling and answers
 * sampling/createMessage with conn.sample. @returns {Promise<Conn>}
 */
export async function connectHttp(url, opts = {}) {
  const conn = baseConn('http', opts);
  conn.exchanges = [];
  conn.transport = new StreamableHTTPClientTransport(new URL(url), { fetch: spyFetch(conn.exchanges) });
  await conn.client.connect(conn.transport);
  conn.tools = (await conn.client.listTools()).tools;
  conn.close = async () => {
    // A host ends its session explicitly (HTTP DELETE), then closes.
    await conn.transport.terminateSession();
    await conn.client.close();
  };
  return conn;
}

/** connectStdio spawns `mcptaskd -stdio` on a fresh database. @returns {Promise<Conn>} */
export async function connectStdio() {
  const conn = baseConn('stdio');
  const params = stdioServerParams();
  conn.transport = new StdioClientTransport(params);
  let stderr = '';
  const stderrEnded = new Promise((resolve) => {
    conn.transport.stderr.setEncoding('utf8');
    conn.transport.stderr.on('data', (s) => (stderr += s));
    conn.transport.stderr.on('end', resolve);
    conn.transport.stderr.on('close', resolve);
  });
  conn.stderr = () => stderr;
  await conn.client.connect(conn.transport);
  conn.tools = (await conn.client.listTools()).tools;
  conn.close = async () => {
    // Closing stdin ends the session; the server then shuts down by itself.
    await conn.client.close();
    await Promise.race([stderrEnded, new Promise((r) => setTimeout(r, 10_000).unref())]);
    assert.match(stderr, /mcptaskd stopped/, `mcptaskd -stdio did not stop cleanly; stderr:\n${stderr}`);
    assert.doesNotMatch(stderr, /panic|level=ERROR/, `mcptaskd -stdio logged errors:\n${stderr}`);
  };
  return conn;
}

/**
 * startTask calls a tool as a task through the SDK's callToolStream and
 * returns the created task (the CreateTaskResult's task), leaving the
 * stream right after taskCreated. Without `task`, the SDK adds `task: {}`
 * by itself for tools whose execution.taskSupport is optional or required.
 */
export async function startTask(client, name, args, task) {
  const stream = client.experimental.tasks.callToolStream(
    { name, arguments: args },
    CallToolResultSchema,
    task === undefined ? undefined : { task },
  );
  for await (const m of stream) {
    if (m.type === 'taskCreated') return m.task;
    if (m.type === 'error') throw m.error;
    throw new Error(`callToolStream: first message is ${m.type}, want taskCreated`);
  }
  throw new Error('callToolStream ended without a message');
}

/** collect drains a callToolStream into an array of its messages. */
export async function collect(stream) {
  const out = [];
  for await (const m of stream) out.push(m);
  return out;
}

export const TERMINAL = new Set(['completed', 'failed', 'cancelled']);

/**
 * pollTask polls tasks/get until pred(task) holds, honouring the server's
 * pollInterval (capped at maxIntervalMs to keep the tests quick). Returns
 * the last task and every status seen, in order.
 */
export async function pollTask(client, taskId, pred = (t) => TERMINAL.has(t.status), { timeoutMs = 30_000, maxIntervalMs = 100 } = {}) {
  const deadline = Date.now() + timeoutMs;
  const statuses = [];
  for (;;) {
    const t = await client.experimental.tasks.getTask(taskId);
    if (statuses.at(-1) !== t.status) statuses.push(t.status);
    if (pred(t)) return { task: t, statuses };
    if (Date.now() > deadline) throw new Error(`task ${taskId} still ${t.status} (${t.statusMessage}) after ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, Math.min(t.pollInterval ?? 500, maxIntervalMs)));
  }
}

/**
 * expectMcpError asserts that p rejects with an McpError of the given code
 * (and message pattern); it returns the error.
 */
export async function expectMcpError(p, code, pattern) {
  let err;
  await assert.rejects(
    typeof p === 'function' ? p() : p,
    (e) => {
      err = e;
      return true;
    },
  );
  assert.ok(err instanceof McpError, `want an McpError, got ${err?.constructor?.name}: ${err?.message}`);
  assert.equal(err.code, code, `error code of: ${err.message}`);
  if (pattern) assert.match(err.message, pattern);
  return err;
}

/** textOf returns the text of a CallToolResult's content blocks. */
export function textOf(result) {
  return (result.content ?? [])
    .filter((c) => c.type === 'text')
    .map((c) => c.text)
    .join('\n');
}

/**
 * until resolves once cond() holds, checking it every 10 ms (the SDK
 * delivers notifications on its own schedule); it fails after timeoutMs
 * with what() as the message.
 */
export async function until(cond, timeoutMs, what = () => 'condition not met') {
  const deadline = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > deadline) assert.fail(`after ${timeoutMs} ms: ${what()}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}
