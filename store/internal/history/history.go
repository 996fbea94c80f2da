// Package history computes the task history events (see task.Event) that
// the store backends record in their writes, so that every backend records
// the same history at the same times.
package history

import (
	"time"

	"github.com/mcptask/mcptask/task"
)

// Events returns the events of a write that turned before (nil for a
// creation) into after, by instance: task.EventsOf at the time Time
// picks.
func Events(before, after *task.Task, now time.Time, instance string) []task.Event {
	return task.EventsOf(before, after, Time(before, after, now), instance)
}

// Time is when a write that turned before into after happened: the
// task's LastUpdatedAt when the write set it (the writer's own clock, so
// that the history agrees with the task), else now (the store's clock).
func Time(before, after *task.Task, now time.Time) time.Time {
	if !after.LastUpdatedAt.IsZero() && (before == nil || after.LastUpdatedAt.After(before.LastUpdatedAt)) {
		return after.LastUpdatedAt
	}
	return now
}
