package mcptask

import (
	"context"
	"slices"

	"github.com/mcptask/mcptask/dashboard"
	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/task"
)

// Dashboard returns the operator dashboard (see package dashboard) of s,
// whose tasks are in st (s's engine's store): opts's Engine, Store, Tools
// and Drain are filled in from s when unset, so that the dashboard shows
// s's tools and sets its drain switch (audited as set by "dashboard").
// Mount it under a prefix with http.StripPrefix, behind
// opts.Authenticate or on a loopback listener.
func (s *Server) Dashboard(st store.Store, opts dashboard.Options) (*dashboard.Handler, error) {
	if opts.Engine == nil {
		opts.Engine = s.eng
	}
	if opts.Store == nil {
		opts.Store = st
	}
	if opts.Tools == nil {
		opts.Tools = s.ToolNames
	}
	if opts.Drain == nil {
		opts.Drain = serverDrain{s}
	}
	return dashboard.New(opts)
}

// serverDrain is the drain switch of a Server as the dashboard sets it.
type serverDrain struct{ s *Server }

func (d serverDrain) DrainState() (bool, []string) {
	st := d.s.Draining()
	return st.All, st.Tools
}

func (d serverDrain) SetToolDrain(ctx context.Context, tool string, drained bool, by task.Owner) error {
	d.s.drainMu.Lock()
	defer d.s.drainMu.Unlock()
	cur := d.s.Draining()
	st := DrainState{All: cur.All, Fallback: cur.Fallback}
	st.Tools = slices.DeleteFunc(slices.Clone(cur.Tools), func(t string) bool { return t == tool })
	if drained {
		st.Tools = append(st.Tools, tool)
		slices.Sort(st.Tools)
	}
	return d.s.SetDrain(ctx, st, "dashboard", by)
}
