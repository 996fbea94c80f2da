package dashboard

import (
	"context"

	"github.com/mcptask/mcptask"
	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/task"
)

// ForServer returns the dashboard of srv, whose tasks are in st (srv's
// engine's store): opts's Engine, Store, Tools, Drain, Links, Queue,
// RunAgain, Gates and Fleet are filled in from srv when unset, so that
// the dashboard shows srv's tools and its fleet's switches, sets its
// drain switch (audited as set by "dashboard") and decides its approvals
// and handoffs. Mount it under a
// prefix with http.StripPrefix, behind opts.Authenticate or on a
// loopback listener.
func ForServer(srv *mcptask.Server, st store.Store, opts Options) (*Handler, error) {
	if opts.Engine == nil {
		opts.Engine = srv.Engine()
	}
	if opts.Store == nil {
		opts.Store = st
	}
	if opts.Tools == nil {
		opts.Tools = srv.ToolNames
	}
	if opts.Drain == nil {
		opts.Drain = serverDrain{srv}
	}
	if opts.Links == nil {
		opts.Links = srv.Links
	}
	if opts.Queue == nil {
		opts.Queue = srv.ToolQueue
	}
	if opts.RunAgain == nil {
		opts.RunAgain = srv.RunAgain
	}
	if opts.Gates == nil {
		opts.Gates = srv
	}
	if opts.Fleet == nil {
		opts.Fleet = srv.Fleet
	}
	return New(opts)
}

// serverDrain is the drain switch of an mcptask.Server as the dashboard
// sets it.
type serverDrain struct{ s *mcptask.Server }

func (d serverDrain) DrainState() (bool, []string) {
	st := d.s.Draining()
	return st.All, st.Tools
}

func (d serverDrain) SetToolDrain(ctx context.Context, tool string, drained bool, by task.Owner) error {
	return d.s.DrainTool(ctx, tool, drained, "dashboard", by, "from the dashboard")
}
