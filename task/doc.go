// Package task is the domain of mcptask: task statuses and the one table of
// allowed transitions, task IDs, timestamps, and the TTL and polling policy.
//
// The package does no I/O. Stores persist [Task] values, the engine moves them
// through [Transition], and the wire adapters translate them to and from the
// JSON shapes of each MCP protocol revision.
package task
