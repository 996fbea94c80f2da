// Package loadgen holds what the benchmarks of bench/ and the load tool
// bench/cmd/mcptask-load share: an in-process mcptask server on a real
// SQLite file behind real loopback HTTP, a lean 2026-07-28 wire client
// (pre-encoded request bodies, no per-call JSON encoding) and a
// closed-loop load runner that records every operation's latency.
package loadgen

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/mcptask/mcptask"
	"github.com/mcptask/mcptask/audit"
	"github.com/mcptask/mcptask/engine"
	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/store/sqlite"
	"github.com/mcptask/mcptask/task"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The tools of the in-process server. Both are no-ops, so that what is
// measured is the protocol, the task engine and the store.
const (
	// PlainTool has no task support: a tools/call always answers
	// synchronously.
	PlainTool = "noop"
	// TaskTool has optional task support: a tools/call that declares the
	// tasks extension creates a task, which completes at once.
	TaskTool = "noop_task"
	// SleepTool has optional task support: its tasks sleep
	// [ServerOptions].Sleep (default [DefaultSleep]) and then complete.
	SleepTool = "sleep_task"
	// HoldTool has optional task support: its tasks wait until
	// [ServerOptions].Hold is closed, then complete (a server without
	// Hold does not have it).
	HoldTool = "hold_task"
)

// DefaultSleep is how long a task of [SleepTool] sleeps by default.
const DefaultSleep = 200 * time.Millisecond

// RetainTTL is the retention of the in-process server's tasks: long enough
// that the sweeper deletes nothing during a run.
const RetainTTL = 24 * time.Hour

// Server is an in-process mcptask server: SQLite file, engine, MCP server
// with the two no-op tools and [SleepTool], served over loopback HTTP.
type Server struct {
	// URL is the MCP endpoint, http://127.0.0.1:PORT/mcp.
	URL string
	// Store is the SQLite task store; nil when [ServerOptions].Store
	// gave another store.
	Store *sqlite.Store
	// Tasks is the task store, whatever its backend.
	Tasks store.Store
	// Engine is the task engine.
	Engine *engine.Engine

	hs *http.Server
}

// ServerOptions configures [StartServer]. The zero value is the server
// without limits nor audit trail.
type ServerOptions struct {
	// SQLite configures the store; nil means mcptaskd's: sqlite.Open's
	// defaults with the view cache on (sqlite.Options.ViewCache; the
	// file is the server's alone).
	SQLite *sqlite.Options
	// Store, if set, is the task store to serve instead of a SQLite file
	// (e.g. a PostgreSQL store; the dbPath of [StartServer] and SQLite
	// are then ignored). The server owns it: Close closes it. To support
	// [Server.WaitIdle] it must have a ListActive method, as the SQLite
	// and PostgreSQL stores do.
	Store store.Store
	// InstanceID names the server's engine (engine.Options.InstanceID):
	// distinct servers sharing a PostgreSQL schema need distinct names.
	// Empty means a random one.
	InstanceID string
	// Limits are the per-requester limits (mcptask.Options.Limits); the
	// zero value sets none. See [UnrefusedLimits] to measure their
	// bookkeeping without refusals.
	Limits mcptask.Limits
	// Audit turns the audit trail on (engine.Options.Audit): its records
	// are formatted by a slog JSON handler that writes to io.Discard, so
	// building and formatting them is measured but nothing is written.
	Audit bool
	// RequesterHeader, if set, names an HTTP request header (see
	// [RequesterHeader]) that chooses the requester of a request: the
	// user "loadgen:" and its value, as if of a bearer token (mcptask's
	// default requester, with the fast lane), so that clients can act as
	// distinct requesters without tokens of their own. A request without
	// the header is the requester mcptask would choose (the anonymous
	// requester). Empty leaves mcptask's default unchanged.
	RequesterHeader string
	// Sleep is how long a task of [SleepTool] sleeps; zero means
	// [DefaultSleep].
	Sleep time.Duration
	// Hold, if set, adds [HoldTool], whose tasks complete once Hold is
	// closed: many tasks working at once, ended together.
	Hold <-chan struct{}
	// DisableFastLane turns the server's fast lane of tasks/get off
	// (mcptask.Options.FastLane, on by default here), to compare the two lanes.
	DisableFastLane bool
}

// RequesterHeader is the header [ClientOptions].Requester sends, which
// a server started with [ServerOptions].RequesterHeader set to it reads.
const RequesterHeader = "X-Loadgen-Requester"

// RequesterPrefix starts the owner of a requester named by
// [ServerOptions].RequesterHeader.
const RequesterPrefix = "loadgen:"

// requesterAuth serves h with the requester of a request named by its
// header name, as the user of a bearer token ("loadgen:" and the header's
// value) that the go-sdk's bearer authentication verified: mcptask's
// default requester, with its fast lane, as behind mcptaskd's bearer
// tokens. A request without the header is served as it came.
func requesterAuth(name string, h http.Handler) http.Handler {
	verify := func(_ context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
		if !strings.HasPrefix(token, RequesterPrefix) {
			return nil, auth.ErrInvalidToken
		}
		return &auth.TokenInfo{UserID: token, Expiration: time.Now().Add(24 * time.Hour)}, nil
	}
	authed := auth.RequireBearerToken(verify, nil)(h)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		v := r.Header.Get(name)
		if v == "" {
			h.ServeHTTP(w, r)
			return
		}
		r.Header.Set("Authorization", "Bearer "+RequesterPrefix+v)
		authed.ServeHTTP(w, r)
	})
}

// UnrefusedLimits returns [mcptask.DefaultLimits] with rates and bursts so
// high (10⁹) that no request is ever refused, and an unfinished-task cap
// (2³⁰) that is a real positive cap, so that the store counts the
// requester's unfinished tasks at each creation: what the limits cost when
// they refuse nothing (bucket lookups, the count, poll tracking).
func UnrefusedLimits() mcptask.Limits {
	l := mcptask.DefaultLimits
	l.MaxActiveTasks = 1 << 30
	l.CreateRate, l.CreateBurst = 1e9, 1e9
	l.RequestRate, l.RequestBurst = 1e9, 1e9
	return l
}

// StartServer assembles the server on the SQLite file dbPath (created if
// missing; opts may be nil), or on [ServerOptions].Store, and serves it on
// a free loopback port.
func StartServer(dbPath string, opts *ServerOptions) (*Server, error) {
	if opts == nil {
		opts = &ServerOptions{}
	}
	st := opts.Store
	if st == nil {
		so := opts.SQLite
		if so == nil {
			so = &sqlite.Options{ViewCache: true}
		}
		lite, err := sqlite.Open(dbPath, so)
		if err != nil {
			return nil, err
		}
		st = lite
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	var trail *audit.Logger
	if opts.Audit {
		// As mcptaskd's -audit-log: JSON records, here written nowhere.
		trail = audit.New(slog.New(slog.NewJSONHandler(io.Discard, nil)))
	}
	eng, err := engine.New(engine.Options{
		Store:      st,
		Logger:     quiet,
		Audit:      trail,
		InstanceID: opts.InstanceID,
		Policy:     task.Policy{DefaultTTL: RetainTTL, MaxTTL: RetainTTL},
	})
	if err != nil {
		st.Close()
		return nil, err
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "mcptask-bench", Version: "1"}, &mcp.ServerOptions{Logger: quiet})
	mo := &mcptask.Options{Logger: quiet, Limits: opts.Limits, FastLane: !opts.DisableFastLane}
	ts, err := mcptask.New(srv, eng, mo)
	if err != nil {
		st.Close()
		return nil, err
	}
	noop := func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil, nil
	}
	mcptask.AddTool(ts, &mcp.Tool{Name: PlainTool, Description: "no-op, synchronous only"}, noop, mcptask.ToolOptions{})
	mcptask.AddTool(ts, &mcp.Tool{Name: TaskTool, Description: "no-op, optional task"}, noop, mcptask.ToolOptions{Support: mcptask.Optional})
	sleep := opts.Sleep
	if sleep <= 0 {
		sleep = DefaultSleep
	}
	mcptask.AddTool(ts, &mcp.Tool{Name: SleepTool, Description: "sleeps, optional task"},
		func(ctx context.Context, req *mcp.CallToolRequest, in struct{}) (*mcp.CallToolResult, any, error) {
			t := time.NewTimer(sleep)
			defer t.Stop()
			select {
			case <-t.C:
				return noop(ctx, req, in)
			case <-ctx.Done():
				return nil, nil, ctx.Err()
			}
		}, mcptask.ToolOptions{Support: mcptask.Optional})
	if hold := opts.Hold; hold != nil {
		mcptask.AddTool(ts, &mcp.Tool{Name: HoldTool, Description: "waits for the bench, optional task"},
			func(ctx context.Context, req *mcp.CallToolRequest, in struct{}) (*mcp.CallToolResult, any, error) {
				select {
				case <-hold:
					return noop(ctx, req, in)
				case <-ctx.Done():
					return nil, nil, ctx.Err()
				}
			}, mcptask.ToolOptions{Support: mcptask.Optional})
	}
	if err := eng.Run(context.Background()); err != nil {
		st.Close()
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		st.Close()
		return nil, err
	}
	mux := http.NewServeMux()
	// The same handler options as cmd/mcptaskd.
	var h http.Handler = ts.Handler(&mcp.StreamableHTTPOptions{
		Stateless:                    true,
		PropagateRequestCancellation: true,
		Logger:                       quiet,
	})
	if opts.RequesterHeader != "" {
		h = requesterAuth(opts.RequesterHeader, h)
	}
	mux.Handle("/mcp", h)
	s := &Server{
		URL:    fmt.Sprintf("http://%s/mcp", ln.Addr()),
		Tasks:  st,
		Engine: eng,
		hs:     &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second},
	}
	s.Store, _ = st.(*sqlite.Store)
	go func() { _ = s.hs.Serve(ln) }()
	return s, nil
}

// WaitIdle waits until no task of the store is working or input_required:
// every task created so far has recorded its outcome.
func (s *Server) WaitIdle(ctx context.Context) error {
	al, ok := s.Tasks.(interface {
		ListActive(context.Context) ([]*task.Task, error)
	})
	if !ok {
		return fmt.Errorf("loadgen: the store %T has no ListActive", s.Tasks)
	}
	for {
		active, err := al.ListActive(ctx)
		if err != nil {
			return err
		}
		if len(active) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d tasks still active: %w", len(active), ctx.Err())
		case <-time.After(2 * time.Millisecond):
		}
	}
}

// Close stops serving, shuts the engine down and closes the store.
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	herr := s.hs.Shutdown(ctx)
	if errors.Is(herr, context.DeadlineExceeded) {
		herr = s.hs.Close()
	}
	return errors.Join(herr, s.Engine.Shutdown(ctx), s.Tasks.Close())
}
