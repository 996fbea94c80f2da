// MCP Inspector 2.12.0 (@modelcontextprotocol/inspector) in its scripted
// CLI mode, run as the separate process a CI job or an agent runs:
// `mcp-inspector --cli --server-url URL --protocol-era modern|legacy
// --method tools/call --tool-name NAME --tool-args-json JSON --format json`.
// HOME points at a temporary directory so that the CLI's catalog and
// client config (~/.mcp-inspector) are its own.

import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { join, resolve, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { tempDir } from './harness.mjs';

const here = dirname(fileURLToPath(import.meta.url));
export const INSPECTOR_BIN = resolve(here, '../node_modules/@modelcontextprotocol/inspector/clients/launcher/build/index.js');

let home;
const live = new Set();
process.on('exit', () => {
  for (const c of live) c.kill('SIGKILL');
});

/**
 * spawnInspector starts the CLI with args after `--cli` and returns the
 * child, its output so far and a promise of its exit.
 */
export function spawnInspector(args) {
  home ??= tempDir('mcptask-inspector-home-');
  const child = spawn(process.execPath, [INSPECTOR_BIN, '--cli', ...args], {
    env: { ...process.env, HOME: home, MCP_CATALOG_PATH: join(home, 'mcp.json'), NO_COLOR: '1' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  live.add(child);
  const out = { stdout: '', stderr: '' };
  child.stdout.setEncoding('utf8').on('data', (s) => (out.stdout += s));
  child.stderr.setEncoding('utf8').on('data', (s) => (out.stderr += s));
  const exited = once(child, 'exit').then(([code, signal]) => {
    live.delete(child);
    return { code, signal };
  });
  return { child, out, exited };
}

/**
 * runInspector runs the CLI to its end (killed after timeoutMs) and
 * returns its exit code, output and the parsed JSON of stdout (--format
 * json prints one object: {result} or {error}).
 */
export async function runInspector(args, { timeoutMs = 20_000 } = {}) {
  const p = spawnInspector(args);
  const timer = setTimeout(() => p.child.kill('SIGKILL'), timeoutMs);
  const { code, signal } = await p.exited;
  clearTimeout(timer);
  let json;
  try {
    json = JSON.parse(p.out.stdout);
  } catch {
    // not JSON
  }
  return { code, signal, stdout: p.out.stdout, stderr: p.out.stderr, json };
}

/** callArgs builds the arguments of a tools/call. */
export function callArgs(url, era, tool, args, extra = []) {
  return ['--server-url', url, '--protocol-era', era, '--method', 'tools/call', '--tool-name', tool, '--tool-args-json', JSON.stringify(args), '--format', 'json', ...extra];
}
