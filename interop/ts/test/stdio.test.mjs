// mcptaskd over stdio with the TypeScript SDK's StdioClientTransport: each
// flow spawns `mcptaskd -stdio -db <temporary file>` and closes its stdin at
// the end; the server must then stop cleanly (checked on its stderr log).

import { describe } from 'node:test';
import { connectStdio } from '../lib/client.mjs';
import { registerFlows } from '../lib/flows.mjs';

describe('stdio', () => {
  registerFlows(() => connectStdio());
});
