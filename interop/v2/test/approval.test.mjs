// Approvals (docs/rollout.md) through @modelcontextprotocol/client 2.4.0
// with @modelcontextprotocol/ext-tasks 0.2.2, on both task wires: a call
// of an approval-gated tool is answered with a task that stays working
// (SEP-2848's shape), the library keeps polling it, and it completes once
// an operator approves it (mcptaskd's /admin/decide), or ends failed
// (code -32016) once denied. Nothing here is specific to the library: it
// sees an ordinary long task.

import { describe, before, after, it } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { connectV2, textOf, WIRE_2025, WIRE_2026 } from '../lib/v2client.mjs';
import { startServer, until, tempDir } from '../lib/harness.mjs';

const TASK = { task: { preference: 'require' } };
// A Standard Schema that takes any JSON result (for tasks/result).
const ANY = { '~standard': { version: 1, vendor: 'mcptask-interop', validate: (value) => ({ value }) } };
const SMALL = { n: 1000, steps: 2, step_delay_ms: 0 };

for (const wire of [WIRE_2026, WIRE_2025]) {
  describe(`approvals with the v2 client + ext-tasks, ${wire}`, () => {
    let srv;
    let admin;
    before(async () => {
      const config = join(tempDir(), 'mcptaskd.yaml');
      writeFileSync(config, 'demo: true\nrollout:\n  long_computation:\n    approval: {approvers: ["*"], expires: 1h, reason: "interop"}\n');
      srv = await startServer({ extraArgs: ['-config', config] });
      admin = srv.direct.replace(/\/mcp$/, '');
    });
    after(async () => {
      await srv?.stop();
    });

    // decide approves or denies the task id through the admin endpoint.
    const decide = async (id, approve, reason) => {
      const res = await fetch(`${admin}/admin/decide`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ taskId: id, approve, reason }),
      });
      assert.equal(res.status, 200, await res.text());
    };

    // heldTask calls the gated tool and waits until the task is listed
    // as waiting for an approval; it returns the execution and its ID.
    const heldTask = async (c) => {
      const ex = await c.session.callTool('long_computation', SMALL, TASK);
      assert.equal(ex.kind, 'task');
      let id;
      await until(async () => {
        const res = await fetch(`${admin}/admin/approvals?kind=approval`);
        const held = await res.json();
        id = held.find((h) => h.tool === 'long_computation')?.taskId;
        return id;
      }, 10_000, () => 'the call never waited for an approval');
      return { ex, id };
    };

    it('approved: the task completes with the tool result', { timeout: 30_000 }, async () => {
      const c = await connectV2(srv.url, { wire });
      try {
        const { ex, id } = await heldTask(c);
        const settled = ex.settle();
        await decide(id, true, 'interop approval');
        const { outcome } = await settled;
        assert.equal(outcome.status, 'completed', outcome.error?.message);
        assert.match(textOf(outcome.result), /There are 168 primes up to 1000/);
      } finally {
        await c.close();
      }
    });

    it('denied: the task fails naming who and why', { timeout: 30_000 }, async () => {
      const c = await connectV2(srv.url, { wire });
      try {
        const { ex, id } = await heldTask(c);
        const settled = ex.settle();
        await decide(id, false, 'not this week');
        const { outcome } = await settled;
        assert.equal(outcome.status, 'failed');
        if (wire === WIRE_2026) {
          // The task's error object: code, message and data come through.
          assert.equal(outcome.error?.code, -32016, JSON.stringify(outcome.error));
          assert.match(outcome.error?.message ?? '', /not approved: denied by anonymous: not this week/);
          assert.equal(outcome.error?.data?.reason, 'denied');
        } else {
          // 2025: the library reads the failure from tasks/get (its status
          // message); tasks/result has the JSON-RPC error.
          assert.match(outcome.error?.message ?? '', /denied by anonymous: not this week/);
          const raw = await c.client.request({ method: 'tasks/result', params: { taskId: ex.handle.taskId } }, ANY).catch((e) => e);
          assert.equal(raw.code, -32016);
        }
      } finally {
        await c.close();
      }
    });
  });
}
