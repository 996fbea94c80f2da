// What the test files share: one mcptaskd over Streamable HTTP per test
// file (interop/ts/lib/server.mjs, imported, not copied), behind the
// recording proxy of recorder.mjs; deadline waits; the demo tools' known
// outcomes.

import assert from 'node:assert/strict';
import { startHttpServer, tempDir, mcptaskdPath } from '../../ts/lib/server.mjs';
import { startRecorder } from './recorder.mjs';

export { tempDir, mcptaskdPath };

/**
 * startServer starts mcptaskd (extraArgs, e.g. a -config) and a recorder in
 * front of it (holdFirstSessionGet: see startRecorder). url is the
 * recorder's; direct the server's own.
 */
export async function startServer({ extraArgs = [], timeoutMs = 30_000, holdFirstSessionGet = false } = {}) {
  const server = await startHttpServer({ extraArgs, timeoutMs });
  const rec = await startRecorder(server.url, { holdFirstSessionGet });
  return {
    url: rec.url,
    direct: server.url,
    rec,
    server,
    stop: async () => {
      await rec.close();
      const out = await server.stop();
      assert.equal(out.code, 0, `mcptaskd exited with code ${out.code} (signal ${out.signal}); stderr:\n${out.stderr}`);
      assert.doesNotMatch(out.stderr, /panic|level=ERROR/, `mcptaskd logged errors:\n${out.stderr}`);
    },
  };
}

/**
 * until resolves once cond() returns a truthy value (which it returns),
 * checking every everyMs (10 ms); it fails after timeoutMs with what() as
 * the message. A deadline wait on a condition, never a fixed sleep.
 */
export async function until(cond, timeoutMs, what = () => 'condition not met', everyMs = 10) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await cond();
    if (v) return v;
    if (Date.now() > deadline) assert.fail(`after ${timeoutMs} ms: ${what()}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

/** deferred returns a promise with its resolve function. */
export function deferred() {
  let resolve;
  const promise = new Promise((r) => (resolve = r));
  return { promise, resolve };
}

/** withDeadline rejects if p does not settle within ms. */
export async function withDeadline(p, ms, what) {
  let timer;
  try {
    return await Promise.race([
      p,
      new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error(`${what}: not settled after ${ms} ms`)), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

// The demo tools' arguments and outcomes the flows check.
export const UNKNOWN_TASK = 'AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA';
export const POLL_INTERVAL_MS = 500;
// Longer than one poll interval, so that a polling client sees a step.
export const LONG = { n: 100, steps: 3, step_delay_ms: 400 };
export const LONG_TEXT = 'There are 25 primes up to 100 (computed in 3 steps).';
export const LONG_STRUCTURED = { n: 100, primes: 25, steps: 3 };
// Runs for about 10 s unless cancelled.
export const ENDLESS = { n: 100_000, steps: 100, step_delay_ms: 100 };
export const DEPLOY = { service: 'api', version: 'v2', build_steps: 1, step_delay_ms: 0 };
export const DEPLOY_QUESTION = /^The build of api@v2 succeeded\. Roll it out to production now\?$/;
export const DEPLOY_DONE = 'Deployed api@v2 to production.';
export const DEPLOY_DECLINED = 'Deployment of api@v2 aborted: the user declined. Nothing was rolled out.';
export const MIGRATION = { steps: 3, fail_at_step: 2, step_delay_ms: 0 };
export const MIGRATION_ERROR = /^migration 0042_add_orders_index failed at step 2 of 3: lock wait timeout on table "orders"; the migration was rolled back$/;
export const MIGRATION_DATA = { migration: '0042_add_orders_index', failedStep: 2, steps: 3, rolledBack: true };
export const LINT = { line_delay_ms: 0 };
export const LINT_TEXT = /^Found 3 problems in 6 lines:\nline 4: trailing-whitespace/;
