// Package v20251125 is the wire adapter for the experimental tasks of MCP
// 2025-11-25 (stateful sessions): the JSON shapes of CreateTaskResult{task},
// tasks/get, tasks/result, tasks/list and tasks/cancel, the `task` request
// parameter, the server capability and tool-level execution.taskSupport,
// and their translation to and from the domain types of package task.
package v20251125
