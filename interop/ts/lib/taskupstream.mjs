// An upstream MCP server that speaks tasks itself, written with the
// official TypeScript SDK's experimental tasks (server side: an in-memory
// task store, registerToolTask): the kind of server mcptaskd's gateway
// makes durable. It runs in the test's own Node process on loopback HTTP,
// so it outlives the mcptaskd processes the test kills.
//
// It is served statelessly (no Mcp-Session-Id): a task created over one
// connection is found over the next, as after a restart of mcptaskd. (The
// SDK binds a task to the session that created it when there is one; a
// client that comes back on a new session would not find it.)

import { createServer } from 'node:http';
import { once } from 'node:events';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { InMemoryTaskStore, InMemoryTaskMessageQueue } from '@modelcontextprotocol/sdk/experimental/tasks';

/**
 * startTaskUpstream serves one task tool, "build": each call creates an
 * upstream task ("working", status message "building"), counted in runs,
 * which completes once release() is called.
 *
 * @returns {Promise<{url: string, runs: () => number, release: () => void, close: () => Promise<void>}>}
 */
export async function startTaskUpstream() {
  const taskStore = new InMemoryTaskStore();
  const taskMessageQueue = new InMemoryTaskMessageQueue();
  let runs = 0;
  let release;
  const released = new Promise((r) => (release = r));

  const newServer = () => {
    const server = new McpServer(
      { name: 'ts-task-upstream', version: '1.0.0' },
      { capabilities: { tasks: { list: {}, cancel: {}, requests: { tools: { call: {} } } } }, taskStore, taskMessageQueue },
    );
    server.experimental.tasks.registerToolTask(
      'build',
      { description: 'Builds; completes once the test releases it' },
      {
        async createTask(...args) {
          const extra = args.at(-1);
          runs++;
          const run = runs;
          const task = await extra.taskStore.createTask({ ttl: extra.taskRequestedTtl ?? 600_000 });
          await taskStore.updateTaskStatus(task.taskId, 'working', 'building');
          released.then(() =>
            taskStore.storeTaskResult(task.taskId, 'completed', { content: [{ type: 'text', text: `built, run ${run}` }] }),
          );
          return { task };
        },
        async getTask(...args) {
          const extra = args.at(-1);
          return await extra.taskStore.getTask(extra.taskId);
        },
        async getTaskResult(...args) {
          const extra = args.at(-1);
          return await extra.taskStore.getTaskResult(extra.taskId);
        },
      },
    );
    return server;
  };

  const http = createServer(async (req, res) => {
    if (req.method !== 'POST') {
      res.writeHead(405, { Allow: 'POST' }).end();
      return;
    }
    let body = '';
    req.setEncoding('utf8');
    for await (const chunk of req) body += chunk;
    const server = newServer();
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
    res.on('close', () => {
      transport.close();
      server.close();
    });
    await server.connect(transport);
    await transport.handleRequest(req, res, JSON.parse(body));
  });
  http.listen(0, '127.0.0.1');
  await once(http, 'listening');
  const { port } = http.address();
  return {
    url: `http://127.0.0.1:${port}/mcp`,
    runs: () => runs,
    release,
    close: async () => {
      http.closeAllConnections();
      http.close();
      taskStore.cleanup?.();
    },
  };
}
