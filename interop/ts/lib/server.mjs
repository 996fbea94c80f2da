// Starting mcptaskd for the interop tests: over Streamable HTTP (one server
// process per test file, on 127.0.0.1 port 0 with a temporary SQLite file)
// or over stdio (the SDK's StdioClientTransport spawns `mcptaskd -stdio`).
//
// The binary is $MCPTASKD (scripts/interop.sh builds it); without it, the
// first caller builds ./cmd/mcptaskd with `go build` into a temporary
// directory.

import { spawn, execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { once } from 'node:events';

const repo = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');

// Temporary directories to remove when the test process exits.
const tempDirs = [];
// Server processes to kill if the test process exits without stopping them.
const children = new Set();
process.on('exit', () => {
  for (const c of children) {
    try {
      c.kill('SIGKILL');
    } catch {
      // already gone
    }
  }
  for (const d of tempDirs) rmSync(d, { recursive: true, force: true });
});

export function tempDir(prefix = 'mcptask-interop-') {
  const d = mkdtempSync(join(tmpdir(), prefix));
  tempDirs.push(d);
  return d;
}

let binary;

// mcptaskdPath returns the mcptaskd binary to run.
export function mcptaskdPath() {
  if (binary) return binary;
  if (process.env.MCPTASKD) {
    binary = resolve(process.env.MCPTASKD);
    if (!existsSync(binary)) throw new Error(`MCPTASKD=${binary} does not exist`);
    return binary;
  }
  const out = join(tempDir('mcptask-interop-bin-'), 'mcptaskd');
  execFileSync('go', ['build', '-o', out, './cmd/mcptaskd'], { cwd: repo, stdio: ['ignore', 'inherit', 'inherit'] });
  binary = out;
  return binary;
}

// Flags shared by both transports: a short shutdown grace so that a
// server stopped with tasks still running exits quickly, and no limit on
// task creations: the flows create over a hundred tasks in a few seconds
// (55 at once for tasks/list pagination), all as one anonymous requester,
// and the TypeScript SDK does not back off on mcptask's rate-limit error
// (the Go tests cover the limit). The tasks/* request rate and the other
// limits keep mcptaskd's defaults: the flows poll as a host would under them.
const commonFlags = ['-shutdown-grace', '2s', '-log-level', 'info', '-create-rate', '0'];

/**
 * startHttpServer starts mcptaskd on 127.0.0.1 port 0 with a temporary
 * database (or the one in dir, to restart a server on its tasks), and
 * extraArgs (e.g. a -config), and resolves once it printed "listening on
 * URL". kill ends it with SIGKILL (a crash) and resolves once it exited.
 *
 * @returns {Promise<{url: string, stop: () => Promise<{code: number|null, signal: string|null, stderr: string}>, kill: () => Promise<void>, stderr: () => string}>}
 */
export async function startHttpServer({ timeoutMs = 20_000, extraArgs = [], dir = tempDir() } = {}) {
  const child = spawn(mcptaskdPath(), ['-addr', '127.0.0.1:0', '-db', join(dir, 'tasks.db'), ...commonFlags, ...extraArgs], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.add(child);
  let stdout = '';
  let stderr = '';
  child.stderr.setEncoding('utf8').on('data', (s) => (stderr += s));
  const exited = once(child, 'exit');

  const url = await new Promise((resolveURL, reject) => {
    const timer = setTimeout(() => reject(new Error(`mcptaskd did not report its address in ${timeoutMs} ms; stderr:\n${stderr}`)), timeoutMs);
    child.stdout.setEncoding('utf8').on('data', (s) => {
      stdout += s;
      const m = /^listening on (\S+)$/m.exec(stdout);
      if (m) {
        clearTimeout(timer);
        resolveURL(m[1]);
      }
    });
    exited.then(([code, signal]) => {
      clearTimeout(timer);
      reject(new Error(`mcptaskd exited at start-up (code ${code}, signal ${signal}); stderr:\n${stderr}`));
    });
  });
  if (!/^http:\/\/127\.0\.0\.1:\d+\/mcp$/.test(url)) {
    child.kill('SIGKILL');
    throw new Error(`mcptaskd is not on loopback: ${url}`);
  }

  // stop sends SIGTERM (graceful shutdown), then SIGKILL after 15 s.
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGTERM');
      const t = setTimeout(() => child.kill('SIGKILL'), 15_000);
      await exited;
      clearTimeout(t);
    }
    children.delete(child);
    return { code: child.exitCode, signal: child.signalCode, stderr };
  };
  const kill = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill('SIGKILL');
      await exited;
    }
    children.delete(child);
  };
  return { url, stop, kill, stderr: () => stderr };
}

/**
 * stdioServerParams returns the StdioClientTransport parameters that spawn
 * `mcptaskd -stdio` on a fresh temporary database (each process holds a
 * lock on its database, so each stdio client gets its own).
 */
export function stdioServerParams() {
  const dir = tempDir();
  return {
    command: mcptaskdPath(),
    args: ['-stdio', '-db', join(dir, 'tasks.db'), ...commonFlags],
    stderr: 'pipe',
  };
}
