#!/usr/bin/env node
// An upstream written with the TypeScript SDK v2 server,
// @modelcontextprotocol/server (the version pinned in package.json), as
// its documentation has one written: an McpServer factory served by
// serveStdio (`node v2server.mjs stdio`) or by createMcpHandler on
// node:http through @modelcontextprotocol/node's toNodeHandler
// (`node v2server.mjs http`, which prints "listening on URL" on stdout).
//
// v2 has no task-capable tools: its tasks types are wire schemas only (no
// task store, no registerToolTask; @modelcontextprotocol/ext-tasks is a
// requester and a 2025-11-25 receiver, with no server part). So its tools
// are plain tools, and mcptaskd makes the tasks:
//
//   slow {steps, stepMs}  progress per step (notifications/progress with
//                         the call's progressToken), stops on ctx's abort
//                         signal;
//   confirm {question}    asks the user, written once for both eras as v2
//                         wants it: it returns inputRequired(...) with an
//                         elicitation (2026-07-28: an input_required result
//                         the client fulfils and retries; 2025-11-25: the
//                         SDK's legacy shim sends elicitation/create itself
//                         and re-enters the handler with the answer).
//
// What it saw goes to $UPSTREAM_EVENTS (lib/events.mjs).

import { createServer } from 'node:http';
import { once } from 'node:events';
import * as z from 'zod';
import { McpServer, createMcpHandler, inputRequired } from '@modelcontextprotocol/server';
import { serveStdio } from '@modelcontextprotocol/server/stdio';
import { toNodeHandler } from '@modelcontextprotocol/node';
import { record, slowWork } from './events.mjs';

const transport = process.argv[2];
if (transport !== 'stdio' && transport !== 'http') {
  process.stderr.write('usage: v2server.mjs stdio|http\n');
  process.exit(2);
}
const server = 'v2';

const approveSchema = { type: 'object', properties: { approve: { type: 'boolean', description: 'Go ahead?' } }, required: ['approve'] };

function newServer() {
  const s = new McpServer({ name: 'interop-v2-upstream', version: '1.0.0' });
  s.registerTool(
    'slow',
    {
      description: 'Runs steps steps of stepMs each, reporting progress; stops when cancelled',
      inputSchema: z.object({ steps: z.number().int().min(1), stepMs: z.number().int().min(1) }),
    },
    async ({ steps, stepMs }, ctx) => {
      const token = ctx.mcpReq._meta?.progressToken;
      const text = await slowWork({
        server,
        transport,
        steps,
        stepMs,
        signal: ctx.mcpReq.signal,
        meta: { progressToken: token !== undefined, era: ctx.mcpReq.envelope ? '2026' : '2025' },
        progress: async (progress, total, message) => {
          if (token === undefined) return;
          await ctx.mcpReq.notify({ method: 'notifications/progress', params: { progressToken: token, progress, total, message } });
        },
      });
      return { content: [{ type: 'text', text }] };
    },
  );
  s.registerTool(
    'confirm',
    {
      description: 'Asks the user to approve, and answers what they said',
      inputSchema: z.object({ question: z.string() }),
    },
    async ({ question }, ctx) => {
      const answer = ctx.mcpReq.inputResponses?.approve;
      if (answer === undefined) {
        record({ server, transport, tool: 'confirm', event: 'asked', era: ctx.mcpReq.envelope ? '2026' : '2025' });
        return inputRequired({ inputRequests: { approve: inputRequired.elicit({ message: question, requestedSchema: approveSchema }) } });
      }
      record({ server, transport, tool: 'confirm', event: 'answered', answer });
      const text = answer.action === 'accept' ? `answer: accept ${JSON.stringify(answer.content)}` : `answer: ${answer.action}`;
      return { content: [{ type: 'text', text }] };
    },
  );
  return s;
}

if (transport === 'stdio') {
  record({ server, transport, event: 'process' });
  serveStdio(() => newServer(), { onerror: (e) => process.stderr.write(`v2server: ${e?.stack ?? e}\n`) });
} else {
  const handler = createMcpHandler(() => newServer(), { onerror: (e) => process.stderr.write(`v2server: ${e?.message ?? e}\n`) });
  const node = toNodeHandler(handler);
  const http = createServer((req, res) => {
    if (new URL(req.url, 'http://x').pathname !== '/mcp') {
      res.writeHead(404).end();
      return;
    }
    node(req, res);
  });
  http.listen(0, '127.0.0.1');
  await once(http, 'listening');
  record({ server, transport, event: 'process' });
  process.stdout.write(`listening on http://127.0.0.1:${http.address().port}/mcp\n`);
  process.on('SIGTERM', () => {
    http.closeAllConnections();
    http.close(() => process.exit(0));
  });
}
