package task

import (
	"time"
	"unicode/utf8"
)

// EventKind says what an [Event] of a task's history records.
type EventKind string

// The kinds of [Event].
const (
	// EventCreated: the task was created (To is its first status).
	EventCreated EventKind = "created"
	// EventStatus: the task moved from status From to status To.
	EventStatus EventKind = "status"
	// EventStarted: an engine instance started the task's work: the first
	// run, a re-run after a crash, or a takeover of another instance's
	// task (Attempt counts the runs).
	EventStarted EventKind = "started"
)

// Event is one entry of a task's history (its timeline): a creation, a
// status change or a start of its work, with its time and the engine
// instance that made it. Stores that keep histories (see the store
// package's Historian) record one in the same durable write as the change.
type Event struct {
	// Seq orders the events of one task (1, 2, ...).
	Seq int64
	// Kind says what the event records.
	Kind EventKind
	// At is when the change was written (UTC).
	At time.Time
	// From and To are the statuses before and after (From is empty for
	// EventCreated; both are the current status for EventStarted).
	From, To Status
	// Instance names the engine instance that made the change ("" when
	// it was made outside an engine, or by one that does not say).
	Instance string
	// Attempt is the task's run count after the change.
	Attempt int64
	// Message is the task's status message after the change, cut to
	// [MaxEventMessage] bytes.
	Message string
}

// MaxEventMessage bounds the status message an [Event] keeps.
const MaxEventMessage = 1024

// EventsOf returns the events a write that turned before into after
// records, at time at by instance: none when neither the status nor the
// run changed. A nil before is a creation. Stores call it inside the
// write, so that every backend records the same history.
func EventsOf(before, after *Task, at time.Time, instance string) []Event {
	msg := truncateMessage(after.StatusMessage)
	ev := func(k EventKind, from Status) Event {
		return Event{Kind: k, At: at.UTC(), From: from, To: after.Status, Instance: instance, Attempt: after.Attempts, Message: msg}
	}
	var out []Event
	if before == nil {
		out = append(out, ev(EventCreated, ""))
		if after.Attempts > 0 && after.Runner != "" {
			out = append(out, ev(EventStarted, after.Status))
		}
		return out
	}
	if after.Attempts > before.Attempts && after.Runner != "" {
		out = append(out, ev(EventStarted, before.Status))
		out[len(out)-1].To = before.Status
	}
	if after.Status != before.Status {
		out = append(out, ev(EventStatus, before.Status))
	}
	return out
}

// truncateMessage cuts s to MaxEventMessage bytes on a rune boundary.
func truncateMessage(s string) string {
	if len(s) <= MaxEventMessage {
		return s
	}
	cut := MaxEventMessage
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut]
}
