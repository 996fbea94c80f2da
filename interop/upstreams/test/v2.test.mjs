// The TypeScript SDK v2 server (@modelcontextprotocol/server) behind
// mcptaskd's gateway, over stdio and over Streamable HTTP, asked for
// 2025-11-25 (mcptaskd's default) and for 2026-07-28.

import assert from 'node:assert/strict';
import { upstreamFlows } from '../lib/flows.mjs';
import { textOf } from '../lib/harness.mjs';

// Over HTTP, v2's createMcpHandler serves 2025-era traffic statelessly: a
// fresh server per request, which never saw the client's initialize and
// cannot send it a request. Its legacy shim then cannot turn the tool's
// inputRequired into an elicitation/create, and the call's result is an
// isError saying so (the task fails with it). Asked for 2026-07-28, the
// same tool's input_required result is fulfilled by mcptaskd's upstream
// client (its go-sdk session) and the call retried: that works.
function statelessLegacyCannotAsk(c, result, seen, task) {
  assert.equal(task.status, 'failed', `status ${task.status} (${task.statusMessage})`);
  assert.equal(result.isError, true);
  assert.match(textOf(result), /per-request legacy serving cannot receive server-to-client requests/);
  assert.equal(c.elicitations.length, 0, 'the client was not asked');
  assert.ok(seen.some((e) => e.event === 'asked') && !seen.some((e) => e.event === 'answered'), JSON.stringify(seen));
}

for (const transport of ['stdio', 'http']) {
  for (const protocolVersion of [undefined, '2026-07-28']) {
    upstreamFlows({
      server: 'v2',
      program: 'v2server.mjs',
      transport,
      protocolVersion,
      checkAsk: transport === 'http' && !protocolVersion ? statelessLegacyCannotAsk : undefined,
    });
  }
}
