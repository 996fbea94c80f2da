// The TypeScript fastmcp framework behind mcptaskd's gateway, over stdio
// and over Streamable HTTP (fastmcp speaks 2025-11-25 only).

import { upstreamFlows } from '../lib/flows.mjs';

for (const transport of ['stdio', 'http']) {
  upstreamFlows({ server: 'fastmcp', program: 'fastmcpserver.mjs', transport });
}
