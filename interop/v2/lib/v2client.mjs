// The v2 TypeScript client (@modelcontextprotocol/client) with the Tasks
// requester library (@modelcontextprotocol/ext-tasks), connected the way
// the library documents it and the way MCP Inspector 2.12 does:
//
//   - 2026-07-28: the Client negotiates the modern era ({pin: '2026-07-28'});
//     the library's task session gets a host-owned raw dispatch (here a
//     fetch POST of the framed JSON-RPC request to the endpoint, the SDK's
//     own wire codecs having no 2026 task shapes) and the v2 request
//     framing (protocol version, client info, client capabilities with the
//     io.modelcontextprotocol/tasks extension);
//   - 2025-11-25: the Client's plain legacy initialize, a stateful session;
//     the library's session without raw dispatch (it drives the SDK Client).
//
// Elicitation and sampling are answered through the library's
// onInputRequest (createApplicationInputHandler); each request the
// application sees is recorded on the connection.

import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import {
  createApplicationInputHandler,
  createTaskSessionFromClient,
  toolDeclarationFromMcpTool,
} from '@modelcontextprotocol/ext-tasks/client';

export const CLIENT_INFO = { name: 'mcptask-interop-v2', version: '1.0.0' };
export const WIRE_2026 = '2026-07-28';
export const WIRE_2025 = '2025-11-25';
export const TASKS_EXT = 'io.modelcontextprotocol/tasks';
// One stable identity for the server under test: serialized task
// references are scoped by it, so a new session (or process) with the same
// endpointId may resume a task by its reference.
export const ENDPOINT_ID = 'mcptaskd-interop';

/**
 * rawDispatchFor returns a RawClientDispatch for a 2026-07-28 endpoint: it
 * POSTs the (already framed) request with the headers the revision asks
 * for (MCP-Protocol-Version, Mcp-Method, Mcp-Name of a tools/call; the
 * library adds Mcp-Name of a tasks/* request itself in its context
 * headers) and returns the response of the same id, read from a JSON body
 * or an SSE stream.
 */
export function rawDispatchFor(url, log = []) {
  let seq = 0;
  return async (request, options = {}) => {
    const id = request.id ?? `v2-raw-${++seq}`;
    const msg = { jsonrpc: '2.0', ...request, id };
    const headers = {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': WIRE_2026,
      'mcp-method': msg.method,
      ...(msg.method === 'tools/call' && typeof msg.params?.name === 'string' ? { 'mcp-name': msg.params.name } : {}),
      ...(options.context?.headers ?? {}),
    };
    log.push({ t: Date.now(), method: msg.method, params: msg.params, headers });
    const res = await fetch(url, { method: 'POST', headers, body: JSON.stringify(msg), signal: options.signal });
    const ct = res.headers.get('content-type') ?? '';
    const text = await res.text();
    let messages = [];
    if (ct.startsWith('text/event-stream')) {
      for (const ev of text.split(/\r?\n\r?\n/)) {
        const data = ev
          .split(/\r?\n/)
          .filter((l) => l.startsWith('data:'))
          .map((l) => l.slice(5).replace(/^ /, ''))
          .join('\n');
        if (data) messages.push(JSON.parse(data));
      }
    } else if (text) {
      const v = JSON.parse(text);
      messages = Array.isArray(v) ? v : [v];
    }
    const reply = messages.find((m) => m.id === id && ('result' in m || 'error' in m));
    if (!reply) throw new Error(`raw dispatch ${msg.method}: HTTP ${res.status} without a response of id ${id}: ${text.slice(0, 500)}`);
    return 'error' in reply ? { kind: 'error', error: reply.error } : { kind: 'result', result: reply.result };
  };
}

/**
 * connectV2 connects a v2 Client to url on the given wire and makes the
 * library's task session on it.
 *
 * @param {string} url
 * @param {{wire: string, elicit?: Function, sample?: Function}} opts
 */
export async function connectV2(url, { wire, sampling = true } = {}) {
  const conn = {
    wire,
    elicitations: [],
    samplings: [],
    errors: [],
    rawLog: [],
    /** elicit(request, context) answers an elicitation (settable per test). */
    elicit: () => ({ action: 'cancel' }),
    /** sample(request, context) answers a sampling request. */
    sample: () => {
      throw new Error('this test did not expect a sampling request');
    },
  };
  const modern = wire === WIRE_2026;
  const capabilities = {
    elicitation: { form: {} },
    ...(sampling ? { sampling: {} } : {}),
    ...(modern ? { extensions: { [TASKS_EXT]: {} } } : {}),
  };
  const client = new Client(CLIENT_INFO, {
    capabilities,
    ...(modern ? { versionNegotiation: { mode: { pin: WIRE_2026 } } } : {}),
  });
  client.onerror = (e) => conn.errors.push(e);
  const transport = new StreamableHTTPClientTransport(new URL(url));
  await client.connect(transport);
  conn.client = client;
  conn.transport = transport;
  conn.tools = (await client.listTools()).tools;
  const decls = new Map(conn.tools.map((t) => [t.name, toolDeclarationFromMcpTool(t)]));
  conn.session = createTaskSessionFromClient(client, {
    endpointId: ENDPOINT_ID,
    tools: { currentTool: (name) => decls.get(name) },
    ...(modern
      ? {
          rawDispatch: rawDispatchFor(url, conn.rawLog),
          v2RequestFraming: { protocolVersion: WIRE_2026, clientInfo: CLIENT_INFO, clientCapabilities: capabilities },
        }
      : {}),
    onInputRequest: createApplicationInputHandler({
      elicitation: async (request, context) => {
        conn.elicitations.push({ request, context });
        return conn.elicit(request, context);
      },
      sampling: async (request, context) => {
        conn.samplings.push({ request, context });
        return conn.sample(request, context);
      },
      roots: async () => ({ roots: [] }),
    }),
    onError: (e) => conn.errors.push(e),
  });
  conn.close = async () => {
    await conn.session.close();
    if (!modern) await transport.terminateSession().catch(() => {});
    await client.close();
  };
  return conn;
}

/** textOf returns the text of a CallToolResult's content blocks. */
export function textOf(result) {
  return (result?.content ?? [])
    .filter((c) => c.type === 'text')
    .map((c) => c.text)
    .join('\n');
}

/**
 * sortErrors splits the errors a 2025 connection reported into those a
 * test must fail on and the one race the library has on that wire: when a
 * notifications/tasks/status arrives while its tasks/get poll is in flight,
 * ext-tasks aborts the poll, the SDK Client forgets the request, and the
 * server's answer, when it comes, is reported to onerror as "Received a
 * response for an unknown message ID". Such an error is set aside only if
 * the record shows that ID was a tasks/get of this session.
 */
export function sortErrors(conn, exchanges) {
  const abandoned = [];
  const unexpected = [];
  for (const e of conn.errors) {
    const m = /^Received a response for an unknown message ID: (.*)$/s.exec(e?.message ?? '');
    let id;
    try {
      id = m && JSON.parse(m[1]).id;
    } catch {
      // not the race
    }
    const wasPoll =
      id !== undefined &&
      exchanges.some(
        (x) => x.headers['mcp-session-id'] === conn.transport.sessionId && x.sent.some((s) => s.id === id && s.method === 'tasks/get'),
      );
    (wasPoll ? abandoned : unexpected).push(e);
  }
  return { abandoned, unexpected };
}
