// The TypeScript fastmcp framework behind mcptaskd's gateway, over stdio
// and over Streamable HTTP. fastmcp speaks 2025-11-25 only: asked for
// 2026-07-28 it negotiates 2025-11-25, and mcptaskd says so and starts
// without its tools.

import { describe, after, it } from 'node:test';
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { upstreamFlows } from '../lib/flows.mjs';
import { connectHttp, startHttpServer, startHttpUpstream, tempDir, until, writeConfig } from '../lib/harness.mjs';

for (const transport of ['stdio', 'http']) {
  // A call whose client went away (mcptaskd killed) runs on to its end in
  // fastmcp over HTTP: its ctx.signal is not aborted by the broken stream.
  upstreamFlows({ server: 'fastmcp', program: 'fastmcpserver.mjs', transport, httpDisconnect: 'done' });
}

describe('fastmcp asked for 2026-07-28', () => {
  let upstream, server;
  after(async () => {
    await server?.stop();
    await upstream?.stop();
  });
  it('mcptaskd starts without its tools, saying the upstream negotiated 2025-11-25; /healthz reports it down', { timeout: 60_000 }, async () => {
    upstream = await startHttpUpstream('fastmcpserver.mjs', join(tempDir(), 'events.jsonl'));
    const config = writeConfig({ fm: { url: upstream.url, protocolVersion: '2026-07-28' } });
    server = await startHttpServer({ extraArgs: ['-config', config], timeoutMs: 60_000 });
    await until(() => /does not speak 2026-07-28 \(it negotiated 2025-11-25\)/.test(server.stderr()), 20_000, () => server.stderr());
    const c = await connectHttp(server.url);
    try {
      assert.deepEqual(c.tools.map((t) => t.name), []);
    } finally {
      await c.close();
    }
    const health = await (await fetch(server.url.replace(/\/mcp$/, '/healthz'))).json();
    assert.match(String(health.upstreams?.fm), /^down/, JSON.stringify(health));
  });
});
