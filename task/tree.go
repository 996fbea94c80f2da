package task

import "strings"

// StepKeyPrefix begins the idempotency key of a child task: the key is
// the prefix, the parent's ID, ":" and the child's step name (unique per
// owner, so that a re-run of the parent's work finds the child it
// started for a step).
const StepKeyPrefix = "io.mcptask/step:"

// StepOf returns the step name of the child task t: its IdempotencyKey
// without StepKeyPrefix, the parent's ID and ":"; "" for a task that is
// no child.
func StepOf(t *Task) string {
	if t.Parent == "" {
		return ""
	}
	return strings.TrimPrefix(t.IdempotencyKey, StepKeyPrefix+string(t.Parent)+":")
}
