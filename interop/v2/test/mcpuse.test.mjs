// mcp-use 2.5.2 ("MCP framework and CLI built on the official v2 SDK") is
// installed at its exact version, but it has no client to drive here: the
// package is a server framework, and its client (the `mcp-use client` CLI
// command, server.proxy()) loads the optional peer `@mcp-use/client`,
// which the npm registry does not serve (404 for every version of the
// peer range ^2.0.1 … ^2.3.2, and for the `^2.0.0-alpha.0` that the CLI
// tries to install on first use). docs/interop.md marks every mcp-use
// flow "cannot" with that reason; this test holds the facts it rests on,
// so that the day the client can be installed, this file fails and is
// replaced by real flows.

import { it } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';

it('mcp-use 2.5.2: its client is the optional peer @mcp-use/client, which is not installed', async () => {
  // (its exports do not include ./package.json)
  const pkg = JSON.parse(readFileSync(new URL('../node_modules/mcp-use/package.json', import.meta.url), 'utf8'));
  assert.equal(pkg.version, '2.5.2');
  assert.equal(pkg.peerDependenciesMeta['@mcp-use/client']?.optional, true);
  assert.match(pkg.peerDependencies['@mcp-use/client'], /\^2\.3\.2$/);
  // It is built on the official v2 SDK (its own pinned copy).
  assert.equal(pkg.dependencies['@modelcontextprotocol/client'], '2.0.0');
  await assert.rejects(import('@mcp-use/client'), (e) => e.code === 'ERR_MODULE_NOT_FOUND');
  // What mcp-use exports is the server side.
  const m = await import('mcp-use');
  assert.equal(typeof m.MCPServer, 'function');
  assert.equal(m.MCPClient, undefined);
});
