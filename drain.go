package mcptask

import "slices"

// DrainFallback is what a drained tool's task-augmented calls get.
type DrainFallback string

// The drain fallbacks.
const (
	// DrainRefuse refuses them (-32010, data.reason "draining"): the
	// default.
	DrainRefuse DrainFallback = "refuse"
	// DrainSync answers them synchronously, as plain calls, when the
	// tool's task support is Optional; a Required tool's are refused.
	DrainSync DrainFallback = "sync"
)

// DrainState is a server's drain switch.
type DrainState struct {
	// All drains every tool.
	All bool `json:"all"`
	// Tools are the tools drained when All is false.
	Tools []string `json:"tools"`
	// Fallback is what a drained tool's task-augmented calls get; empty
	// means DrainRefuse.
	Fallback DrainFallback `json:"fallback"`
}

// Active reports whether the switch drains any tool.
func (d DrainState) Active() bool { return d.All || len(d.Tools) > 0 }

// Equal reports whether d and o are the same switch (tools in any
// order, an empty fallback as DrainRefuse).
func (d DrainState) Equal(o DrainState) bool {
	a, b := slices.Clone(d.Tools), slices.Clone(o.Tools)
	slices.Sort(a)
	slices.Sort(b)
	return d.All == o.All && slices.Equal(slices.Compact(a), slices.Compact(b)) && d.fallback() == o.fallback()
}

func (d DrainState) fallback() DrainFallback {
	if d.Fallback == "" {
		return DrainRefuse
	}
	return d.Fallback
}
