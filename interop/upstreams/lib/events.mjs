// What an upstream program saw, as JSON lines appended to the file named
// by $UPSTREAM_EVENTS: the test reads them to know that a call started,
// that the upstream was asked to cancel it, that it finished. Both the
// upstream (record, slowWork) and the test (readEvents, waitEvent) use this
// module. Each line carries the upstream's pid, so a test can tell the
// processes of a stdio upstream apart (one per mcptaskd session).

import { appendFileSync, readFileSync, existsSync, watch } from 'node:fs';
import { dirname, basename } from 'node:path';

/** record appends one event (synchronously: lines keep their order). */
export function record(event) {
  const file = process.env.UPSTREAM_EVENTS;
  if (!file) return;
  appendFileSync(file, JSON.stringify({ pid: process.pid, at: Date.now(), ...event }) + '\n');
}

/** readEvents returns the events recorded so far in file. */
export function readEvents(file) {
  if (!existsSync(file)) return [];
  return readFileSync(file, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l));
}

/**
 * waitEvent resolves with the first event of file for which pred holds,
 * woken by changes of the file's directory (no polling); it rejects after
 * timeoutMs naming what it waited for and what it saw.
 */
export function waitEvent(file, pred, timeoutMs = 30_000, what = 'an event') {
  return new Promise((resolve, reject) => {
    let done = false;
    const finish = (err, ev) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      watcher.close();
      if (err) reject(err);
      else resolve(ev);
    };
    const check = () => {
      const ev = readEvents(file).find(pred);
      if (ev) finish(null, ev);
    };
    const watcher = watch(dirname(file), (_, name) => {
      if (!name || name === basename(file)) check();
    });
    const timer = setTimeout(
      () => finish(new Error(`no ${what} in ${timeoutMs} ms; events: ${JSON.stringify(readEvents(file))}`)),
      timeoutMs,
    );
    check();
  });
}

/**
 * slowWork is the body of both upstreams' `slow` tool: steps steps of
 * stepMs each, each reported through progress(i, steps, message); it ends
 * early, throwing, when signal aborts (the client cancelled, or the
 * connection went away), and records what happened.
 */
export async function slowWork({ server, transport, steps, stepMs, signal, progress, meta }) {
  const run = `${process.pid}:${Math.random().toString(36).slice(2, 8)}`;
  record({ server, transport, tool: 'slow', event: 'started', run, steps, stepMs, meta });
  const aborted = new Promise((resolve) => {
    if (signal.aborted) resolve();
    else signal.addEventListener('abort', () => resolve(), { once: true });
  });
  let finished = false;
  aborted.then(() => {
    if (!finished) record({ server, transport, tool: 'slow', event: 'aborted', run, reason: String(signal.reason ?? '') });
  });
  for (let i = 1; i <= steps; i++) {
    const tick = new Promise((resolve) => setTimeout(resolve, stepMs));
    const which = await Promise.race([tick.then(() => 'tick'), aborted.then(() => 'abort')]);
    if (which === 'abort') {
      finished = true;
      throw new Error(`slow: aborted at step ${i} of ${steps}`);
    }
    await progress(i, steps, `step ${i} of ${steps}`);
  }
  finished = true;
  record({ server, transport, tool: 'slow', event: 'done', run });
  return `slow done after ${steps} steps (${server} over ${transport})`;
}
