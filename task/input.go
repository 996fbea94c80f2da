package task

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// The caps on a task's outstanding input requests: each is stored with
// the task (and rewritten with it on every change), so a work that asks
// without waiting for the answers, or an upstream that floods elicitations,
// would otherwise grow the task without bound.
const (
	// MaxPendingInputRequests is the most input requests a task holds
	// outstanding at once.
	MaxPendingInputRequests = 32
	// MaxPendingInputBytes is the most bytes a task's outstanding input
	// requests take together.
	MaxPendingInputBytes = 1 << 20
)

// ErrTooManyInputRequests is AddInputRequest's refusal of a request that
// would take a task past MaxPendingInputRequests or MaxPendingInputBytes;
// the task is left unchanged.
var ErrTooManyInputRequests = errors.New("the task has too many outstanding input requests")

// AddInputRequest records a new outstanding input request on a non-terminal
// task, moves it to input_required and returns the request's key, unique for
// the task's lifetime. A request past the caps on outstanding requests is
// refused (an error wrapping ErrTooManyInputRequests) and t is unchanged.
func (t *Task) AddInputRequest(request json.RawMessage, now time.Time) (string, error) {
	if t.Status.Terminal() {
		return "", &TransitionError{From: t.Status, To: InputRequired}
	}
	if n := len(t.InputRequests); n >= MaxPendingInputRequests {
		return "", fmt.Errorf("%w: %d waiting for an answer, at most %d", ErrTooManyInputRequests, n, MaxPendingInputRequests)
	}
	size := len(request)
	for _, r := range t.InputRequests {
		size += len(r)
	}
	if size > MaxPendingInputBytes {
		return "", fmt.Errorf("%w: %d bytes with this one of %d, at most %d", ErrTooManyInputRequests, size, len(request), MaxPendingInputBytes)
	}
	t.InputSeq++
	key := fmt.Sprintf("input-%d", t.InputSeq)
	if t.InputRequests == nil {
		t.InputRequests = map[string]json.RawMessage{}
	}
	t.InputRequests[key] = request
	if t.Status != InputRequired {
		if err := t.Transition(InputRequired, now); err != nil {
			return "", err
		}
	}
	t.LastUpdatedAt = now.UTC()
	return key, nil
}

// HasInputKey reports whether key names an input request of t, whether
// outstanding or already answered.
func (t *Task) HasInputKey(key string) bool {
	_, asked := t.InputRequests[key]
	_, answered := t.InputResponses[key]
	return asked || answered
}

// Answer applies client responses to outstanding input requests. Responses
// for keys that are unknown or already answered are ignored and reported in
// ignored. When no request is left outstanding the task returns to working.
func (t *Task) Answer(responses map[string]json.RawMessage, now time.Time) (accepted, ignored []string, err error) {
	if t.Status.Terminal() {
		return nil, nil, &TransitionError{From: t.Status, To: Working}
	}
	for k, v := range responses {
		if _, ok := t.InputRequests[k]; !ok {
			ignored = append(ignored, k)
			continue
		}
		delete(t.InputRequests, k)
		if t.InputResponses == nil {
			t.InputResponses = map[string]json.RawMessage{}
		}
		t.InputResponses[k] = v
		accepted = append(accepted, k)
	}
	if len(accepted) > 0 {
		t.LastUpdatedAt = now.UTC()
		if len(t.InputRequests) == 0 && t.Status == InputRequired {
			if err := t.Transition(Working, now); err != nil {
				return nil, nil, err
			}
		}
	}
	return accepted, ignored, nil
}

// TakeResponse removes and returns the delivered answer for key, if any.
func (t *Task) TakeResponse(key string) (json.RawMessage, bool) {
	v, ok := t.InputResponses[key]
	if ok {
		delete(t.InputResponses, key)
	}
	return v, ok
}

// WithdrawInput drops the input request key, answered or not (the
// question no longer needs an answer, e.g. it was forwarded from a child
// task that got its answer another way). When no request is left
// outstanding the task returns to working. It reports whether t changed.
func (t *Task) WithdrawInput(key string, now time.Time) bool {
	_, asked := t.InputRequests[key]
	_, answered := t.InputResponses[key]
	if t.Status.Terminal() || !(asked || answered) {
		return false
	}
	delete(t.InputRequests, key)
	delete(t.InputResponses, key)
	t.LastUpdatedAt = now.UTC()
	if len(t.InputRequests) == 0 && t.Status == InputRequired {
		_ = t.Transition(Working, now) // input_required → working is always allowed
	}
	return true
}
