// Package servertest starts an mcptask server for tests: a task store (a
// real SQLite file unless one is given), an engine, a go-sdk server with
// mcptask on it, the tools a test registers, and real loopback HTTP in
// front, stopped when the test ends.
package servertest

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/mcptask/mcptask"
	"github.com/mcptask/mcptask/engine"
	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/store/sqlite"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Options says what to start. The zero value starts an exclusive engine
// on a new SQLite file, with no tool, logging nothing.
type Options struct {
	// Store holds the tasks; nil opens the SQLite file DB.
	Store store.Store
	// DB is the SQLite file opened when Store is nil; "" is a new file in
	// the test's temporary directory.
	DB string
	// Engine is the engine's options; Store and (if nil) Logger are set
	// here, and Exclusive when the store is a SQLite file of its own.
	Engine engine.Options
	// Logger receives every log record; nil discards them.
	Logger *slog.Logger
	// Register adds the tools, before the server starts (a gateway, say).
	// It may return a function to call when the server stops.
	Register func(ts *mcptask.Server) (stop func(), err error)
	// HTTP is the Streamable HTTP handler's options; nil means the
	// defaults of mcptask.Server.Handler.
	HTTP *mcp.StreamableHTTPOptions
	// Tasks is the mcptask server's options; its Logger is set here.
	Tasks mcptask.Options
	// Wrap, if set, wraps the Streamable HTTP handler (e.g. to count
	// requests).
	Wrap func(http.Handler) http.Handler
	// StopGrace is how long running work may finish when the server stops
	// at the end of the test; zero means 50 ms.
	StopGrace time.Duration
}

// Server is a running test server.
type Server struct {
	// URL is the endpoint on loopback, without a path: the handler
	// serves every path.
	URL    string
	Tasks  *mcptask.Server
	Engine *engine.Engine
	Store  store.Store

	once  sync.Once
	stops []func()
	hs    *httptest.Server
	grace time.Duration
	ctx   context.Context // of the Close in progress: the tasks' grace
}

// Start starts a server as o says; it stops when the test ends.
func Start(t testing.TB, o Options) *Server {
	t.Helper()
	log := o.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	st := o.Store
	eo := o.Engine
	if st == nil {
		db := o.DB
		if db == "" {
			db = filepath.Join(t.TempDir(), "tasks.db")
		}
		s, err := sqlite.Open(db, nil)
		if err != nil {
			t.Fatal(err)
		}
		st = s
		eo.Exclusive = true
	}
	eo.Store = st
	if eo.Logger == nil {
		eo.Logger = log
	}
	if eo.SweepInterval == 0 {
		eo.SweepInterval = -1
	}
	s := &Server{Store: st, grace: o.StopGrace}
	if s.grace == 0 {
		s.grace = 50 * time.Millisecond
	}
	t.Cleanup(s.Stop)
	s.stops = append(s.stops, func() { _ = st.Close() })
	eng, err := engine.New(eo)
	if err != nil {
		t.Fatal(err)
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "servertest", Version: "1"}, &mcp.ServerOptions{Logger: log})
	to := o.Tasks
	to.Logger = log
	ts, err := mcptask.New(srv, eng, &to)
	if err != nil {
		t.Fatal(err)
	}
	s.Tasks, s.Engine = ts, eng
	if o.Register != nil {
		stop, err := o.Register(ts)
		if err != nil {
			t.Fatal(err)
		}
		if stop != nil {
			s.stops = append(s.stops, stop)
		}
	}
	if err := ts.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	s.stops = append(s.stops, func() { _ = ts.Close(s.ctx) })
	var h http.Handler = ts.Handler(o.HTTP)
	if o.Wrap != nil {
		h = o.Wrap(h)
	}
	s.hs = httptest.NewServer(h)
	s.stops = append(s.stops, func() { s.hs.CloseClientConnections(); s.hs.Close() })
	s.URL = s.hs.URL
	return s
}

// Stop stops the server, once, giving running work the StopGrace.
func (s *Server) Stop() {
	ctx, cancel := context.WithTimeout(context.Background(), s.grace)
	defer cancel()
	s.Close(ctx)
}

// Close stops the server, once: HTTP first, then the tasks (running work
// may finish until ctx is done: an expired ctx stops it at once, as a
// crash or a restart does), what Register started, and the store.
func (s *Server) Close(ctx context.Context) {
	s.once.Do(func() {
		s.ctx = ctx
		for i := len(s.stops) - 1; i >= 0; i-- {
			s.stops[i]()
		}
	})
}
