// The test side: upstream programs started as real child processes (HTTP
// ones by the test, so they outlive mcptaskd; stdio ones by mcptaskd, from
// its -config), mcptaskd started by interop/ts/lib/server.mjs, and the
// TypeScript SDK 1.32.2 client of interop/ts/lib/client.mjs (both imported
// by relative path: run `npm ci` in interop/ts too).

import { spawn, execFile, execFileSync } from 'node:child_process';
import { once } from 'node:events';
import { writeFileSync, existsSync } from 'node:fs';
import { join, resolve, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startHttpServer, tempDir } from '../../ts/lib/server.mjs';

export { startHttpServer, tempDir };
export * from '../../ts/lib/client.mjs';
export { readEvents, waitEvent } from './events.mjs';

const here = dirname(fileURLToPath(import.meta.url));

/** programPath names an upstream program of lib/ (v2server.mjs, fastmcpserver.mjs). */
export function programPath(name) {
  return resolve(here, name);
}

const children = new Set();
process.on('exit', () => {
  for (const c of children) {
    try {
      c.kill('SIGKILL');
    } catch {
      // gone
    }
  }
});

/**
 * startHttpUpstream runs `node lib/PROGRAM http` with $UPSTREAM_EVENTS set
 * to events and resolves with its URL once it printed "listening on URL".
 */
export async function startHttpUpstream(program, events, { timeoutMs = 20_000 } = {}) {
  const child = spawn(process.execPath, [programPath(program), 'http'], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, UPSTREAM_EVENTS: events },
  });
  children.add(child);
  let stdout = '';
  let stderr = '';
  child.stderr.setEncoding('utf8').on('data', (s) => (stderr += s));
  const exited = once(child, 'exit');
  const url = await new Promise((resolveURL, reject) => {
    const timer = setTimeout(() => reject(new Error(`${program} gave no URL in ${timeoutMs} ms; stderr:\n${stderr}`)), timeoutMs);
    child.stdout.setEncoding('utf8').on('data', (s) => {
      stdout += s;
      const m = /^listening on (http:\/\/127\.0\.0\.1:\d+\/\S*)$/m.exec(stdout);
      if (m) {
        clearTimeout(timer);
        resolveURL(m[1]);
      }
    });
    exited.then(([code, signal]) => {
      clearTimeout(timer);
      reject(new Error(`${program} exited at start (code ${code}, signal ${signal}); stderr:\n${stderr}`));
    });
  });
  return {
    url,
    pid: child.pid,
    stderr: () => stderr,
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGTERM');
        const t = setTimeout(() => child.kill('SIGKILL'), 5_000);
        await exited;
        clearTimeout(t);
      }
      children.delete(child);
    },
  };
}

/** stdioUpstream is the mcpServers entry of `node lib/PROGRAM stdio`. */
export function stdioUpstream(program, events, extra = {}) {
  return { command: process.execPath, args: [programPath(program), 'stdio'], env: { UPSTREAM_EVENTS: events }, ...extra };
}

/** writeConfig writes a mcptaskd -config file (no demo tools) and returns its path. */
export function writeConfig(mcpServers) {
  const file = join(tempDir(), 'mcptaskd.json');
  writeFileSync(file, JSON.stringify({ demo: false, mcpServers }, null, 2));
  return file;
}

/** alive tells whether a process of that pid still exists. */
export function alive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch (e) {
    return e.code === 'EPERM';
  }
}

let cli;

/** mcptaskPath returns the Go `mcptask` CLI: $MCPTASK, or cmd/mcptask built on first use. */
export function mcptaskPath() {
  if (cli) return cli;
  if (process.env.MCPTASK) {
    cli = resolve(process.env.MCPTASK);
    if (!existsSync(cli)) throw new Error(`MCPTASK=${cli} does not exist`);
    return cli;
  }
  const out = join(tempDir('mcptask-upstreams-bin-'), 'mcptask');
  execFileSync('go', ['build', '-o', out, './cmd/mcptask'], { cwd: resolve(here, '../../..'), stdio: ['ignore', 'inherit', 'inherit'] });
  cli = out;
  return cli;
}

/**
 * runCli runs `mcptask --url URL --journal off ARGS...` and resolves with
 * its exit code, stdout and stderr (it never rejects on a non-zero exit).
 */
export function runCli(url, args, { timeoutMs = 30_000 } = {}) {
  return new Promise((resolveRun) => {
    execFile(mcptaskPath(), ['--url', url, '--journal', 'off', ...args], { timeout: timeoutMs }, (err, stdout, stderr) => {
      resolveRun({ code: err ? (err.code ?? err.signal) : 0, stdout, stderr });
    });
  });
}
