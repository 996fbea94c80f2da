package task

import "fmt"

// Status is the lifecycle state of a task, as spelled on every MCP wire.
type Status string

// The task statuses defined by the MCP tasks specification.
const (
	// Working means the task's work is in progress.
	Working Status = "working"
	// InputRequired means the task waits for the client to answer one or
	// more input requests (elicitation, sampling, ...).
	InputRequired Status = "input_required"
	// Completed means the work finished and a result is available. A tool
	// result with isError:true is still Completed (its [Outcome] is
	// OutcomeToolError).
	Completed Status = "completed"
	// Failed means the work ended with a JSON-RPC level error.
	Failed Status = "failed"
	// Cancelled means the task was cancelled before it finished.
	Cancelled Status = "cancelled"
)

// Outcome is how a finished task ended, as operators count it: a
// completed task whose result says isError: true (see [ToolError]) is a
// tool error, not a success, though its status is completed.
type Outcome string

// The outcomes of finished tasks.
const (
	// OutcomeOK: completed, and the result is not a tool error.
	OutcomeOK Outcome = "ok"
	// OutcomeToolError: completed with a result that says isError: true.
	OutcomeToolError Outcome = "tool_error"
	// OutcomeFailed: the status is failed.
	OutcomeFailed Outcome = "failed"
	// OutcomeCancelled: the status is cancelled.
	OutcomeCancelled Outcome = "cancelled"
)

// Outcome returns how t ended, or "" while it is not finished.
func (t *Task) Outcome() Outcome {
	switch t.Status {
	case Completed:
		if t.ToolError {
			return OutcomeToolError
		}
		return OutcomeOK
	case Failed:
		return OutcomeFailed
	case Cancelled:
		return OutcomeCancelled
	}
	return ""
}

// Status returns the status of the tasks with outcome o ("" for an
// unknown outcome).
func (o Outcome) Status() Status {
	switch o {
	case OutcomeOK, OutcomeToolError:
		return Completed
	case OutcomeFailed:
		return Failed
	case OutcomeCancelled:
		return Cancelled
	}
	return ""
}

// transitions is the one table of allowed status changes. A status missing
// from the table as a key (the terminal ones) can never change again.
var transitions = map[Status][]Status{
	Working:       {InputRequired, Completed, Failed, Cancelled},
	InputRequired: {Working, Completed, Failed, Cancelled},
}

// Valid reports whether s is one of the five defined statuses.
func (s Status) Valid() bool {
	switch s {
	case Working, InputRequired, Completed, Failed, Cancelled:
		return true
	}
	return false
}

// Terminal reports whether s is a final status (completed, failed or
// cancelled). A terminal task never changes status again.
func (s Status) Terminal() bool {
	return s == Completed || s == Failed || s == Cancelled
}

// CanTransition reports whether a task in status from may move to status to.
// Staying in the same status is not a transition.
func CanTransition(from, to Status) bool {
	for _, s := range transitions[from] {
		if s == to {
			return true
		}
	}
	return false
}

// TransitionError reports a status change that the transition table forbids.
type TransitionError struct {
	From, To Status
}

func (e *TransitionError) Error() string {
	if e.From.Terminal() {
		return fmt.Sprintf("task is already %s; a terminal task cannot become %s", e.From, e.To)
	}
	return fmt.Sprintf("task cannot move from %s to %s", e.From, e.To)
}
