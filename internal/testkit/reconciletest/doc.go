// Package reconciletest holds the end-to-end test of reconciliation
// (issue 14's first "done when"): a tool that records a domain operation
// on the ledger, killed -9 between its submission and its confirmation,
// is reconciled when its task is found unfinished (at the restart of an
// mcptask server on the same SQLite file, or by a second server on the
// same PostgreSQL schema taking it over) to the outcome a real second
// process, the system of record, reports. The test binary plays every
// process: the system of record and the servers are itself, re-executed.
package reconciletest
