package mcptask

import (
	"time"

	"github.com/mcptask/mcptask/internal/push"
)

// Notifications configures the task notifications a [Server] pushes, so
// that clients learn of changes without polling:
//
//   - 2025-11-25: notifications/tasks/status, with the related-task _meta,
//     for the tasks a session created or read, on its stdio connection
//     ([Server.Run]) or on its standalone GET stream over Streamable HTTP
//     ([Server.Handler]);
//   - 2026-07-28: notifications/tasks on a subscriptions/listen stream
//     whose params.notifications.taskIds names the tasks, each carrying
//     the task as tasks/get returns it.
//
// Changes made by any instance sharing the store are seen (on PostgreSQL,
// through its change feed). Notifications are advisory: a client that
// misses one still learns the state from tasks/get.
type Notifications struct {
	// MinInterval coalesces a task's changes: after a notification, the
	// next one for the same task and client waits until MinInterval has
	// passed and carries the task as it is then. Zero means 50 ms;
	// negative sends every change observed.
	MinInterval time.Duration
	// KeepAlive, when positive, re-sends the current status of a running
	// task after KeepAlive without a change, for clients that drop a task
	// they have not heard of for a while (some time out after ~30 s).
	// Zero, the default, sends nothing without a change.
	KeepAlive time.Duration
	// MaxStreams caps the subscriptions/listen streams with task IDs one
	// requester may hold open at once. Zero means 16; negative sets no
	// cap.
	MaxStreams int
	// MaxTasksPerStream caps the task IDs one listen stream follows; the
	// IDs beyond it are not agreed. Zero means 256.
	MaxTasksPerStream int
}

func (n Notifications) options() push.Options {
	return push.Options{
		MinInterval:       n.MinInterval,
		KeepAlive:         n.KeepAlive,
		MaxStreams:        n.MaxStreams,
		MaxTasksPerStream: n.MaxTasksPerStream,
	}
}
