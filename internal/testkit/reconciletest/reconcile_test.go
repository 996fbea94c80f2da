package reconciletest

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcptask/mcptask"
	"github.com/mcptask/mcptask/engine"
	"github.com/mcptask/mcptask/internal/testkit/pgtest"
	"github.com/mcptask/mcptask/internal/testkit/proctest"
	"github.com/mcptask/mcptask/internal/testkit/wiretest"
	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/store/postgres"
	"github.com/mcptask/mcptask/store/sqlite"
	"github.com/mcptask/mcptask/task"
	"github.com/mcptask/mcptask/wire"
)

// helperEnv makes the re-executed test binary one of the processes of
// the test: "sor" (the system of record) or "server" (an mcptask server);
// its arguments follow "--".
const helperEnv = "MCPTASK_RECONCILETEST_HELPER"

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		args := os.Args[1:]
		for i, a := range args {
			if a == "--" {
				args = args[i+1:]
				break
			}
		}
		var err error
		switch mode {
		case "sor":
			err = systemOfRecord()
		case "server":
			err = server(args)
		default:
			err = fmt.Errorf("unknown helper mode %q", mode)
		}
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// systemOfRecord is the downstream system: POST /submit?key=K takes an
// operation and answers its receipt; GET /status?key=K says "pending",
// "applied", "rejected" or "unknown" (never submitted); POST
// /decide?key=K&outcome=applied|rejected settles one; POST
// /auto?outcome=... settles every later submission at once; GET
// /submissions?key=K counts the submissions of a key.
func systemOfRecord() error {
	var (
		mu      sync.Mutex
		state   = map[string]string{}
		count   = map[string]int{}
		auto    string
		receipt int
	)
	mux := http.NewServeMux()
	mux.HandleFunc("POST /submit", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		k := r.URL.Query().Get("key")
		count[k]++
		receipt++
		state[k] = "pending"
		if auto != "" {
			state[k] = auto
		}
		fmt.Fprintf(w, "sor-%d", receipt)
	})
	mux.HandleFunc("GET /status", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		s, ok := state[r.URL.Query().Get("key")]
		if !ok {
			s = "unknown"
		}
		io.WriteString(w, s)
	})
	mux.HandleFunc("POST /decide", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		state[r.URL.Query().Get("key")] = r.URL.Query().Get("outcome")
	})
	mux.HandleFunc("POST /auto", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		auto = r.URL.Query().Get("outcome")
	})
	mux.HandleFunc("GET /submissions", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprint(w, count[r.URL.Query().Get("key")])
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	fmt.Printf("%shttp://%s\n", proctest.ListenPrefix, ln.Addr())
	return http.Serve(ln, mux)
}

// sorCall makes a request to the system of record and returns its body.
func sorCall(ctx context.Context, method, base, path string, q url.Values) (string, error) {
	req, err := http.NewRequestWithContext(ctx, method, base+path+"?"+q.Encode(), nil)
	if err != nil {
		return "", err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("%s %s: %s", method, path, resp.Status)
	}
	return string(b), err
}

type deployArgs struct {
	Target string `json:"target"`
}

// server is an mcptask server whose tool "deploy" (not re-runnable)
// records an operation, submits it to the system of record, records the
// receipt, and waits for the system's answer to confirm or reject it; its
// Reconcile asks the system of record's status.
func server(args []string) error {
	fs := flag.NewFlagSet("server", flag.ContinueOnError)
	db := fs.String("db", "", "SQLite file")
	dsn := fs.String("postgres", "", "PostgreSQL DSN")
	schema := fs.String("schema", "", "PostgreSQL schema")
	sor := fs.String("sor", "", "system of record URL")
	lease := fs.Duration("lease", 0, "engine lease")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx := context.Background()
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	var (
		st  store.Store
		err error
	)
	if *db != "" {
		st, err = sqlite.Open(*db, nil)
	} else {
		st, err = postgres.Open(ctx, *dsn, &postgres.Options{Schema: *schema, Logger: log})
	}
	if err != nil {
		return err
	}
	eng, err := engine.New(engine.Options{Store: st, Logger: log, Exclusive: *db != "", Lease: *lease, ReconcileTimeout: 5 * time.Second})
	if err != nil {
		return err
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "reconciletest", Version: "1"}, nil)
	ts, err := mcptask.New(srv, eng, &mcptask.Options{Logger: log})
	if err != nil {
		return err
	}
	mcptask.AddTool(ts, &mcp.Tool{Name: "deploy", Description: "deploys through the system of record"},
		func(ctx context.Context, _ *mcp.CallToolRequest, in deployArgs) (*mcp.CallToolResult, any, error) {
			op, err := mcptask.FromContext(ctx).RecordOperation(ctx, mcptask.Operation{Object: in.Target, Effect: "deploy " + in.Target})
			if err != nil {
				return nil, nil, err
			}
			if op.State() == task.OpConfirmed {
				return text("already deployed"), nil, nil
			}
			receipt, err := sorCall(ctx, "POST", *sor, "/submit", url.Values{"key": {op.Key()}})
			if err != nil {
				return nil, nil, err
			}
			if err := op.Submitted(ctx, receipt); err != nil {
				return nil, nil, err
			}
			for {
				s, err := sorCall(ctx, "GET", *sor, "/status", url.Values{"key": {op.Key()}})
				if err != nil {
					return nil, nil, err
				}
				switch s {
				case "applied":
					if err := op.Confirmed(ctx, "applied"); err != nil {
						return nil, nil, err
					}
					return text("deployed " + in.Target + " as " + op.Key() + ", receipt " + receipt), nil, nil
				case "rejected":
					if err := op.Rejected(ctx, "rejected"); err != nil {
						return nil, nil, err
					}
					r := text("not deployed")
					r.IsError = true
					return r, nil, nil
				}
				select {
				case <-ctx.Done():
					return nil, nil, ctx.Err()
				case <-time.After(20 * time.Millisecond):
				}
			}
		}, mcptask.ToolOptions{
			Support: mcptask.Required,
			Reconcile: func(ctx context.Context, op task.Operation) (task.OpState, string, error) {
				s, err := sorCall(ctx, "GET", *sor, "/status", url.Values{"key": {op.Key}})
				switch {
				case err != nil:
					return "", "", err
				case s == "applied":
					return task.OpConfirmed, "the system of record applied it", nil
				case s == "rejected", s == "unknown":
					return task.OpRejected, "the system of record did not apply it (" + s + ")", nil
				}
				return task.OpUnknown, "still " + s, nil
			},
		})
	if err := ts.Start(ctx); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	fmt.Printf("%shttp://%s/\n", proctest.ListenPrefix, ln.Addr())
	return http.Serve(ln, ts.Handler(&mcp.StreamableHTTPOptions{Stateless: true, Logger: log}))
}

func text(s string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
}

// start runs the test binary as a helper process and waits for its URL.
func start(t *testing.T, mode string, args ...string) (*proctest.Process, string) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	p, err := proctest.Start(proctest.Config{Path: exe, Args: append([]string{"-test.run=^$", "--"}, args...),
		Env: append(os.Environ(), helperEnv+"="+mode)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Kill)
	u, err := p.WaitListening(context.Background(), time.Minute)
	if err != nil {
		t.Fatalf("%s %v: %v\n%s", mode, args, err, p.Logs())
	}
	return p, u
}

// operationOf returns the operation tasks/get shows for a task, nil if none.
func operationOf(ctx context.Context, c *wiretest.Client, id string) (status string, op *wire.Operation, res json.RawMessage, err error) {
	var r struct {
		Status string                     `json:"status"`
		Result json.RawMessage            `json:"result"`
		Meta   map[string]json.RawMessage `json:"_meta"`
	}
	if err := c.Result(ctx, "tasks/get", map[string]any{"taskId": id}, &r); err != nil {
		return "", nil, nil, err
	}
	if raw, ok := r.Meta[wire.MetaOperation]; ok {
		op = &wire.Operation{}
		if err := json.Unmarshal(raw, op); err != nil {
			return "", nil, nil, err
		}
	}
	return r.Status, op, r.Result, nil
}

// waitFor polls tasks/get until cond holds.
func waitFor(t *testing.T, c *wiretest.Client, id string, what string, cond func(status string, op *wire.Operation) bool) (string, *wire.Operation, json.RawMessage) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for {
		status, op, res, err := operationOf(ctx, c, id)
		if err == nil && cond(status, op) {
			return status, op, res
		}
		if ctx.Err() != nil {
			t.Fatalf("task %s never %s (last: %s, %+v, %v)", id, what, status, op, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestReconcileAfterKill is issue 14's first "done when": a deploy killed
// -9 between its submission and its confirmation is reconciled, when its
// task is found unfinished, to what the system of record (a process of
// its own) says: applied → the task completes, saying it was reconciled,
// with the operation and receipt; not applied → the tool (not declared
// re-runnable) runs again and its new attempt is applied. On SQLite the
// server restarts on its file; on PostgreSQL a second server takes the
// task over when the first one's lease lapses.
func TestReconcileAfterKill(t *testing.T) {
	for _, backend := range []string{"sqlite", "postgres"} {
		for _, outcome := range []string{"applied", "rejected"} {
			t.Run(backend+"/"+outcome, func(t *testing.T) { reconcileAfterKill(t, backend, outcome) })
		}
	}
}

func reconcileAfterKill(t *testing.T, backend, outcome string) {
	ctx := context.Background()
	_, sor := start(t, "sor")
	var args []string
	switch backend {
	case "sqlite":
		args = []string{"-db", filepath.Join(t.TempDir(), "tasks.db")}
	case "postgres":
		dsn := os.Getenv("MCPTASK_TEST_POSTGRES_DSN")
		if dsn == "" {
			t.Skip("MCPTASK_TEST_POSTGRES_DSN is not set")
		}
		args = []string{"-postgres", dsn, "-schema", newSchema(t, dsn), "-lease", "1s"}
	}
	args = append(args, "-sor", sor)
	first, url1 := start(t, "server", args...)
	var url2 string
	if backend == "postgres" {
		_, url2 = start(t, "server", args...) // the instance that takes over
	}
	c := &wiretest.Client{URL: url1, Tasks: true}
	h, err := c.CallTool(ctx, "deploy", map[string]any{"target": "api"})
	if err != nil {
		t.Fatal(err)
	}
	// Between submission and confirmation: the receipt is on the ledger.
	_, op, _ := waitFor(t, c, h.TaskID, "submitted", func(_ string, op *wire.Operation) bool {
		return op != nil && op.State == "submitted"
	})
	if !strings.HasPrefix(op.Receipt, "sor-") {
		t.Fatalf("submitted operation %+v", op)
	}
	first.Kill() // SIGKILL
	<-first.Exited()
	// The system of record settles it while no server runs the task.
	if _, err := sorCall(ctx, "POST", sor, "/decide", url.Values{"key": {op.Key}, "outcome": {outcome}}); err != nil {
		t.Fatal(err)
	}
	if _, err := sorCall(ctx, "POST", sor, "/auto", url.Values{"outcome": {"applied"}}); err != nil {
		t.Fatal(err)
	}
	if backend == "sqlite" {
		_, url2 = start(t, "server", args...)
	}
	c = &wiretest.Client{URL: url2, Tasks: true}
	status, got, res := waitFor(t, c, h.TaskID, "ended", func(status string, _ *wire.Operation) bool {
		return status == "completed" || status == "failed" || status == "cancelled"
	})
	if status != "completed" {
		t.Fatalf("task %s: %s", status, res)
	}
	n, err := sorCall(ctx, "GET", sor, "/submissions", url.Values{"key": {op.Key}})
	if err != nil || n != "1" {
		t.Errorf("the first attempt was submitted %s times (%v), want once", n, err)
	}
	switch outcome {
	case "applied":
		if !strings.Contains(string(res), "Reconciled") || !strings.Contains(string(res), op.Key) || !strings.Contains(string(res), op.Receipt) {
			t.Errorf("result %s does not say it was reconciled, with operation and receipt", res)
		}
		if got.Key != op.Key || got.State != "confirmed" || got.ReconciledAt == "" {
			t.Errorf("operation after reconciliation: %+v", got)
		}
	case "rejected":
		// Re-run: a new attempt, submitted and applied.
		if got.Key != op.Key+"#2" || got.State != "confirmed" || got.ReconciledAt != "" {
			t.Errorf("latest operation after the re-run: %+v", got)
		}
		if !strings.Contains(string(res), "deployed api as "+op.Key+"#2") {
			t.Errorf("result of the re-run: %s", res)
		}
	}
}

// newSchema returns a fresh PostgreSQL schema name, dropped when the test
// ends.
func newSchema(t *testing.T, dsn string) string {
	t.Helper()
	return pgtest.Schema(t, dsn, "mcptask_reconcile_")
}
