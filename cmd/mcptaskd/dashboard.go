package main

import (
	"context"
	"crypto/sha256"
	"errors"
	"net/http"
	"slices"
	"time"

	"github.com/mcptask/mcptask/dashboard"
	"github.com/mcptask/mcptask/internal/httpguard"
	"github.com/mcptask/mcptask/task"
)

// dashboardPrefix is where mcptaskd serves its dashboard.
const dashboardPrefix = "/dashboard"

// newDashboard returns the dashboard's handler, mounted at
// dashboardPrefix: signed in with the admin token (-admin-token-file) or
// a token the verifier accepts that carries -admin-scope; without
// either, served on a loopback listener only, like /admin/drain.
func (a *App) newDashboard() (*dashboard.Handler, http.Handler, error) {
	opts := dashboard.Options{
		Engine: a.eng,
		Store:  a.store,
		Drain:  appDrain{a},
		Tools:  a.tasks.ToolNames,
		Logger: a.log,
		// What the tools give: links about a task, queues and caps, and
		// a finished task's call run again.
		Links:    a.tasks.Links,
		Queue:    a.tasks.ToolQueue,
		RunAgain: a.tasks.RunAgain,
		// The approvals and handoffs (decided as the signed-in
		// operator, as through /admin/decide and /admin/handoff), and
		// the fleet's switches on the Tools page.
		Gates: a.tasks,
		Fleet: a.tasks.Fleet,
	}
	if a.verifier != nil || a.adminTokens != nil {
		opts.Authenticate = a.adminTokenOwner
	}
	if a.adminTokens != nil {
		// Instances sharing the admin tokens share sessions: a load
		// balancer may send a signed-in operator to any of them.
		seed := []byte("mcptaskd dashboard session key\x00")
		for _, t := range a.adminTokens {
			seed = append(seed, t.hash[:]...)
		}
		k := sha256.Sum256(seed)
		opts.SessionKey = k[:]
	}
	d, err := dashboard.New(opts)
	if err != nil {
		return nil, nil, err
	}
	var h http.Handler = http.StripPrefix(dashboardPrefix, d)
	if opts.Authenticate == nil {
		if !isLoopbackAddr(a.cfg.Addr) {
			h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				http.Error(w, "the dashboard is served on a loopback listener only when mcptaskd has no authentication: "+
					"enable authentication (and a token with the -admin-scope scope) or give -admin-token-file", http.StatusForbidden)
			})
		}
	}
	if isLoopbackAddr(a.cfg.Addr) {
		h = httpguard.LoopbackOnly(h)
	}
	return d, h, nil
}

// adminTokenOwner admits the admin token, or a token the verifier
// accepts that carries the admin scope, as the dashboard's sign-in, and
// returns when the token expires (zero for the admin token and static
// tokens without expiry): the session ends with it.
func (a *App) adminTokenOwner(r *http.Request, token string) (task.Owner, time.Time, bool) {
	if token == "" {
		return "", time.Time{}, false
	}
	// A source that sent too many refused tokens is refused without its
	// token being checked (-auth-failures-per-source).
	if blocked, _ := a.guesses.blocked(r); blocked {
		return "", time.Time{}, false
	}
	if op, ok := a.adminTokens.match(token); ok {
		return a.adminTokens.owner(op), time.Time{}, true
	}
	if a.verifier != nil {
		info, err := a.verifier.Verify(r.Context(), token, r)
		if err == nil && slices.Contains(info.Scopes, a.cfg.AdminScope) {
			return task.TokenOwner(info.UserID), info.Expiration, true
		}
		if err == nil {
			a.log.Warn("dashboard: a token without the admin scope was refused", "user", info.UserID, "remote", r.RemoteAddr)
			return "", time.Time{}, false
		}
	}
	a.guesses.failed(r)
	return "", time.Time{}, false
}

// appDrain is mcptaskd's drain switch as the dashboard sets it: like
// PUT /admin/drain, the change stands over the configuration file's
// drain section until that section changes.
type appDrain struct{ a *App }

// DrainState returns the switch now.
func (d appDrain) DrainState() (bool, []string) {
	s := d.a.tasks.Draining()
	return s.All, s.Tools
}

// SetToolDrain drains tool or undrains it in the fleet's switch (a
// read-modify-write in the store: a change made meanwhile on another
// instance is kept), audited as an admin change.
func (d appDrain) SetToolDrain(ctx context.Context, tool string, drained bool, by task.Owner) error {
	a := d.a
	if !a.tasks.HasTool(tool) {
		return errors.New("this server serves no tool of that name")
	}
	if err := a.tasks.DrainTool(ctx, tool, drained, "admin", by, "from the dashboard"); err != nil {
		return err
	}
	p, t, _ := by.Identity()
	a.log.Warn("drain switch set from the dashboard", "tool", tool, "drained", drained, "principal", p, "tenant", t)
	return nil
}
