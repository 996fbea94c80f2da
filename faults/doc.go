// Package faults is mcptask's fault-injection suite: the seed's fault gates
// as tests, run by scripts/test.sh (and so by CI) with
// MCPTASK_FAULT_SUITE=1. It holds no code, only tests, which drive the
// real mcptask binary and the Go client against a real mcptaskd:
//
//   - through a fault proxy (internal/faultproxy) that loses a request or
//     its reply, or cuts every connection, at a chosen moment: before the
//     create reply, right after it, between completed and the result,
//     during input_required, after tasks/cancel; on both wires;
//   - across kill -9 of mcptaskd at random moments (seeded: the seed is
//     printed, and MCPTASK_FAULT_SEED replays a run);
//   - across store faults: a PostgreSQL restart under load, and a full
//     disk under SQLite (on a small tmpfs, where the machine lets the
//     suite mount one; skipped loudly otherwise).
//
// After each fault it checks the invariants on the system of record (the
// task database) and on mcptaskd's audit trail: one task per call however
// often the call was delivered (no duplicate), every acknowledged call
// has its task (none lost), a tool not declared re-runnable was started
// once, statuses moved only by allowed transitions and never out of a
// terminal one, and 'mcptask resume' (or the client's Resume) finished the
// call. It prints what it counted: faults injected, tasks checked,
// duplicates and lost tasks (both must be 0).
//
// The PostgreSQL round restarts the server named by
// MCPTASK_TEST_POSTGRES_DSN, so the suite runs on its own, after the
// other tests.
package faults
