#!/usr/bin/env node
// An upstream written with the TypeScript fastmcp framework (the version
// pinned in package.json; built on the TypeScript SDK v1 `Server`), as its
// README has one written: `new FastMCP`, `addTool`, `start` with
// transportType "stdio" (`node fastmcpserver.mjs stdio`) or "httpStream"
// (`node fastmcpserver.mjs http`: Streamable HTTP with sessions on
// 127.0.0.1, printing "listening on URL" on stdout).
//
// fastmcp offers no tasks: its Server is built with fixed capabilities
// (no `tasks`, no task store) and its tools have no execution.taskSupport.
// So its tools are plain tools and mcptaskd makes the tasks:
//
//   slow {steps, stepMs}  ctx.reportProgress per step, stops on ctx.signal;
//   confirm {question}    ctx.elicit (a 2025-11-25 elicitation/create
//                         request; fastmcp sends it with the server's
//                         elicitInput, not tied to the call's request, so
//                         over HTTP it goes on the session's GET stream).
//
// What it saw goes to $UPSTREAM_EVENTS (lib/events.mjs).

import { createServer } from 'node:net';
import { once } from 'node:events';
import * as z from 'zod';
import { FastMCP } from 'fastmcp';
import { record, slowWork } from './events.mjs';

const transport = process.argv[2];
if (transport !== 'stdio' && transport !== 'http') {
  process.stderr.write('usage: fastmcpserver.mjs stdio|http\n');
  process.exit(2);
}
const server = 'fastmcp';

// fastmcp logs with console.* by default; on stdio, stdout is the wire.
const logger = {
  debug: () => {},
  log: (...a) => process.stderr.write(`fastmcp: ${a.join(' ')}\n`),
  info: (...a) => process.stderr.write(`fastmcp: ${a.join(' ')}\n`),
  warn: (...a) => process.stderr.write(`fastmcp warn: ${a.join(' ')}\n`),
  error: (...a) => process.stderr.write(`fastmcp error: ${a.join(' ')}\n`),
};

const mcp = new FastMCP({ name: 'interop-fastmcp-upstream', version: '1.0.0', logger });

mcp.addTool({
  name: 'slow',
  description: 'Runs steps steps of stepMs each, reporting progress; stops when cancelled',
  parameters: z.object({ steps: z.number().int().min(1), stepMs: z.number().int().min(1) }),
  execute: async ({ steps, stepMs }, ctx) =>
    slowWork({
      server,
      transport,
      steps,
      stepMs,
      signal: ctx.signal,
      progress: (progress, total, message) => ctx.reportProgress({ progress, total, message }),
    }),
});

mcp.addTool({
  name: 'confirm',
  description: 'Asks the user to approve, and answers what they said',
  parameters: z.object({ question: z.string() }),
  execute: async ({ question }, ctx) => {
    record({ server, transport, tool: 'confirm', event: 'asked' });
    const answer = await ctx.elicit({
      mode: 'form',
      message: question,
      requestedSchema: { type: 'object', properties: { approve: { type: 'boolean', description: 'Go ahead?' } }, required: ['approve'] },
    });
    record({ server, transport, tool: 'confirm', event: 'answered', answer });
    return answer.action === 'accept' ? `answer: accept ${JSON.stringify(answer.content)}` : `answer: ${answer.action}`;
  },
});

// A free loopback port: fastmcp's httpStream takes a port number and does
// not report the one it bound, so port 0 would leave it unknown.
async function freePort() {
  const s = createServer();
  s.listen(0, '127.0.0.1');
  await once(s, 'listening');
  const { port } = s.address();
  s.close();
  await once(s, 'close');
  return port;
}

if (transport === 'stdio') {
  await mcp.start({ transportType: 'stdio' });
  record({ server, transport, event: 'process' });
} else {
  const port = await freePort();
  await mcp.start({ transportType: 'httpStream', httpStream: { host: '127.0.0.1', port, endpoint: '/mcp' } });
  record({ server, transport, event: 'process' });
  process.stdout.write(`listening on http://127.0.0.1:${port}/mcp\n`);
  process.on('SIGTERM', () => mcp.stop().then(() => process.exit(0)));
}
