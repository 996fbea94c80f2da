// A configuration of mcptaskd with a workflow (docs/workflows.md), shared
// by interop/ts/test/workflow.test.mjs and interop/v2/test/workflow.test.mjs:
// four commands (`/bin/sh -c` programs, task: required) and two workflows
// made of them, each step a child task of the workflow's task.
//
//   release(ref):        a: prepare(ref)  →  b: unit ∥ c: e2e  →  d: ship(version: ${steps.a/version})
//   release_broken(ref): a: prepare(ref)  →  b: broken ∥ c: e2e  →  d: ship
//
// prepare writes {"version": "REF-build"} to $MCPTASK_RESULT (the step's
// structured result, which d reads). unit waits until the file DIR/go-unit
// exists, e2e until DIR/go: the test creates them, so it sees the steps
// running and decides when they end. In release_broken, b (broken) waits
// until c (e2e2) has started (it writes DIR/e2e2-started), then exits 3
// without continueOnError: the workflow fails at b, and c, running, is
// cancelled (it waits for DIR/never, which nobody creates).

import { writeFileSync } from 'node:fs';
import { join } from 'node:path';

// waitFor is a shell loop that ends once file exists (a condition, polled
// every 20 ms by the command itself).
const waitFor = (file) => `while [ ! -f '${file}' ]; do sleep 0.02; done`;

/**
 * writeWorkflowConfig writes the configuration into dir (also the
 * directory of the commands' files) and returns its path and the files the
 * test creates.
 */
export function writeWorkflowConfig(dir) {
  const refSchema = { type: 'object', properties: { ref: { type: 'string', pattern: '^[A-Za-z0-9._-]+$' } }, required: ['ref'] };
  const sh = (script, ...rest) => ['/bin/sh', '-c', script, 'sh', ...rest];
  const config = {
    demo: false,
    commands: {
      prepare: {
        description: 'Prepares a ref: its version as a structured result',
        inputSchema: refSchema,
        // {{ and }} are literal braces in argv (docs/adapters.md).
        argv: sh(`printf '{{"version": "%s-build"}}' "$1" > "$MCPTASK_RESULT"`, '{ref}'),
        task: 'required',
      },
      unit: {
        description: 'Unit tests: end once the test lets them',
        argv: sh(`${waitFor(join(dir, 'go-unit'))}; printf '{{"suite": "unit", "passed": 12}}' > "$MCPTASK_RESULT"`),
        task: 'required',
      },
      e2e: {
        description: 'End-to-end tests: end once the test lets them',
        argv: sh(`${waitFor(join(dir, 'go'))}; printf '{{"suite": "e2e", "passed": 3}}' > "$MCPTASK_RESULT"`),
        task: 'required',
      },
      e2e2: {
        description: 'End-to-end tests that never end by themselves',
        argv: sh(`touch '${join(dir, 'e2e2-started')}'; ${waitFor(join(dir, 'never'))}`),
        task: 'required',
      },
      broken: {
        description: 'Fails once e2e2 runs',
        argv: sh(`${waitFor(join(dir, 'e2e2-started'))}; echo 'unit tests failed: 2 of 14' >&2; exit 3`),
        task: 'required',
      },
      ship: {
        description: 'Ships a version',
        inputSchema: { type: 'object', properties: { version: { type: 'string' } }, required: ['version'] },
        argv: sh(`printf '{{"shipped": "%s"}}' "$1" > "$MCPTASK_RESULT"`, '{version}'),
        task: 'required',
      },
    },
    workflows: {
      release: {
        description: 'Prepares a ref, tests it (unit and e2e at once), ships it',
        inputSchema: refSchema,
        steps: [
          { name: 'a', tool: 'prepare', arguments: { ref: '${args/ref}' } },
          { name: 'b', tool: 'unit', needs: ['a'] },
          { name: 'c', tool: 'e2e', needs: ['a'] },
          { name: 'd', tool: 'ship', needs: ['b', 'c'], arguments: { version: '${steps.a/version}' } },
        ],
      },
      release_broken: {
        description: 'As release, but its unit tests fail',
        inputSchema: refSchema,
        steps: [
          { name: 'a', tool: 'prepare', arguments: { ref: '${args/ref}' } },
          { name: 'b', tool: 'broken', needs: ['a'] },
          { name: 'c', tool: 'e2e2', needs: ['a'] },
          { name: 'd', tool: 'ship', needs: ['b', 'c'], arguments: { version: '${steps.a/version}' } },
        ],
      },
    },
  };
  const path = join(dir, 'mcptaskd.json');
  writeFileSync(path, JSON.stringify(config, null, 2));
  return {
    path,
    /** release's unit step (b) ends once this file exists. */
    goUnit: join(dir, 'go-unit'),
    /** release's e2e step (c) ends once this file exists. */
    go: join(dir, 'go'),
  };
}

export const CHILDREN = 'io.mcptask/children';
export const PARENT = 'io.mcptask/parentTaskId';

// release with {ref: 'v7'}: what it ends with.
export const RELEASE_ARGS = { ref: 'v7' };
export const RELEASE_TEXT = 'workflow release completed\na: ok\nb: ok\nc: ok\nd: ok';
export const RELEASE_RESULTS = {
  a: { version: 'v7-build' },
  b: { suite: 'unit', passed: 12 },
  c: { suite: 'e2e', passed: 3 },
  d: { shipped: 'v7-build' },
};

/**
 * checkReleaseStructured asserts release's structured result: outcome ok, each step
 * ok after one attempt with its task ID and its result (d's from a's).
 */
export function checkReleaseStructured(assert, sc) {
  assert.equal(sc?.outcome, 'ok', JSON.stringify(sc));
  assert.deepEqual(Object.keys(sc.steps).sort(), ['a', 'b', 'c', 'd']);
  for (const [step, want] of Object.entries(RELEASE_RESULTS)) {
    const s = sc.steps[step];
    assert.equal(s.outcome, 'ok', `step ${step}: ${JSON.stringify(s)}`);
    assert.equal(s.attempts, 1, `step ${step}`);
    assert.equal(typeof s.taskId, 'string', `step ${step}`);
    assert.deepEqual(s.result, want, `step ${step}`);
  }
}
