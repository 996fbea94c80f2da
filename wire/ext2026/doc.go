// Package ext2026 is the wire adapter for the 2026-07-28
// "io.modelcontextprotocol/tasks" extension (SEP-2663): the JSON shapes of
// task handles, tasks/get, tasks/update and tasks/cancel, the per-request
// capability check, and the translation between those shapes and the domain
// types of package task.
package ext2026
