package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcptask/mcptask"
	"github.com/mcptask/mcptask/client"
	"github.com/mcptask/mcptask/demo"
	"github.com/mcptask/mcptask/engine"
	"github.com/mcptask/mcptask/internal/httpguard"
	"github.com/mcptask/mcptask/internal/testkit/proctest"
	"github.com/mcptask/mcptask/internal/testkit/servertest"
	"github.com/mcptask/mcptask/store/sqlite"
	"github.com/mcptask/mcptask/task"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// testServer is what mcptaskd assembles (cmd/mcptaskd NewApp, which a
// package main cannot export): the demo tools with tasks on a real SQLite
// file, served on loopback HTTP, plus a "counted" tool that counts its runs
// and holds until released, and a record of the tasks/* requests.
type testServer struct {
	URL string
	Eng *engine.Engine
	// St is the server's store (its ledger, for tests that set an
	// operation's state as a reconciliation would).
	St *sqlite.Store
	// TS is the mcptask server (for Run on another transport); HS the
	// loopback HTTP server.
	TS *mcptask.Server
	HS *httptest.Server
	// Steps gates the "steps" tool's runs.
	Steps *servertest.Stepper

	runs    atomic.Int64
	release chan struct{}
	relOnce sync.Once

	mu      sync.Mutex
	seen    []seenRequest
	methods map[string]int // requests received, by method, on any transport
}

// seenRequest is one tasks/* request as it reached the server.
type seenRequest struct {
	Method, TaskID, McpName, Version string
}

type serverOpts struct {
	poll       time.Duration                   // suggested poll interval; 0 means 20ms
	wrap       func(http.Handler) http.Handler // wraps the HTTP handler, if set
	defaultTTL time.Duration                   // 0 means the engine's default
	sweep      time.Duration                   // 0 means no sweeping
	limits     mcptask.Limits
	jobTools   bool // the job tools (prefix job_) too
}

func newServer(t testing.TB, o serverOpts) *testServer {
	t.Helper()
	if o.poll == 0 {
		o.poll = 20 * time.Millisecond
	}
	if o.sweep == 0 {
		o.sweep = -1
	}
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "tasks.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.DiscardHandler)
	eng, err := engine.New(engine.Options{
		Store:         st,
		Logger:        logger,
		Policy:        task.Policy{PollInterval: o.poll, DefaultTTL: o.defaultTTL},
		SweepInterval: o.sweep,
	})
	if err != nil {
		t.Fatal(err)
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "mcptaskd-test", Version: "1"}, &mcp.ServerOptions{Logger: logger})
	ts, err := mcptask.New(srv, eng, &mcptask.Options{Logger: logger, Limits: o.limits})
	if err != nil {
		t.Fatal(err)
	}
	demo.Register(ts)
	if o.jobTools {
		ts.AddJobTools("")
	}
	s := &testServer{Eng: eng, St: st, TS: ts, Steps: &servertest.Stepper{}, release: make(chan struct{}), methods: map[string]int{}}
	srv.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			s.mu.Lock()
			s.methods[method]++
			s.mu.Unlock()
			return next(ctx, method, req)
		}
	})
	mcptask.AddTool(ts, &mcp.Tool{Name: "steps", Description: "sets the status message step 1..N, one step each time the test lets it"},
		s.Steps.Run, mcptask.ToolOptions{Support: mcptask.Optional})
	mcptask.AddTool(ts, &mcp.Tool{Name: "sleepy", Description: "runs for ms milliseconds, setting its status message every 500 ms"},
		sleepy, mcptask.ToolOptions{Support: mcptask.Optional})
	mcptask.AddTool(ts, &mcp.Tool{Name: "counted", Description: "counts its runs; holds until the test releases it"},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			n := s.runs.Add(1)
			select {
			case <-s.release:
			case <-ctx.Done():
				return nil, nil, ctx.Err()
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("counted run %d", n)}}}, nil, nil
		}, mcptask.ToolOptions{Support: mcptask.Optional})
	mcptask.AddTool(ts, &mcp.Tool{Name: "rollout", Description: "records a rollout on the ledger, submitted, and returns"},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			tk := mcptask.FromContext(ctx)
			if tk == nil {
				return nil, nil, fmt.Errorf("rollout runs only as a task")
			}
			op, err := tk.RecordOperation(ctx, mcptask.Operation{Object: "service/api", Effect: "roll out api"})
			if err != nil {
				return nil, nil, err
			}
			if err := op.Submitted(ctx, "rollout-"+tk.ID()[:12]); err != nil {
				return nil, nil, err
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "submitted"}}}, nil, nil
		}, mcptask.ToolOptions{Support: mcptask.Optional})
	mcptask.AddTool(ts, &mcp.Tool{Name: "ask_model", Description: "asks the client's model a question (sampling)"},
		func(ctx context.Context, _ *mcp.CallToolRequest, in struct {
			Question string `json:"question"`
		}) (*mcp.CallToolResult, any, error) {
			tk := mcptask.FromContext(ctx)
			if tk == nil {
				return nil, nil, fmt.Errorf("ask_model runs only as a task")
			}
			res, err := tk.CreateMessage(ctx, &mcp.CreateMessageParams{
				MaxTokens: 50,
				Messages:  []*mcp.SamplingMessage{{Role: "user", Content: &mcp.TextContent{Text: in.Question}}},
			})
			if err != nil {
				return nil, nil, err
			}
			answer, _ := res.Content.(*mcp.TextContent)
			if answer == nil {
				return nil, nil, fmt.Errorf("the model answered no text")
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "the model says: " + answer.Text}}}, nil, nil
		}, mcptask.ToolOptions{Support: mcptask.Required})
	if err := eng.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	h := httpguard.LoopbackOnly(ts.Handler(&mcp.StreamableHTTPOptions{Logger: logger}))
	if o.wrap != nil {
		h = o.wrap(h)
	}
	hs := httptest.NewServer(s.record(h))
	s.HS = hs
	s.URL = hs.URL + "/mcp"
	t.Cleanup(func() {
		s.Release()
		hs.CloseClientConnections()
		hs.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		eng.Shutdown(ctx)
		st.Close()
	})
	return s
}

// Release lets the counted tool's runs finish.
func (s *testServer) Release() { s.relOnce.Do(func() { close(s.release) }) }

// record notes each tasks/* request.
func (s *testServer) record(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			var msg struct {
				Method string `json:"method"`
				Params struct {
					TaskID string `json:"taskId"`
				} `json:"params"`
			}
			if json.Unmarshal(body, &msg) == nil && len(msg.Method) > 6 && msg.Method[:6] == "tasks/" {
				s.mu.Lock()
				s.seen = append(s.seen, seenRequest{msg.Method, msg.Params.TaskID, r.Header.Get("Mcp-Name"), r.Header.Get("Mcp-Protocol-Version")})
				s.mu.Unlock()
			}
		}
		next.ServeHTTP(w, r)
	})
}

// count returns how many method requests the server received.
func (s *testServer) count(method string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.methods[method]
}

func (s *testServer) tasksRequests() []seenRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]seenRequest(nil), s.seen...)
}

// dial connects a client to url for the test's duration.
func dial(t testing.TB, url string, o *client.Options) *client.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.Dial(ctx, url, o)
	if err != nil {
		t.Fatalf("Dial %s: %v", url, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// testCtx is the safety net of one test operation.
func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// mcptaskd is the binary built once for the stdio tests.
var (
	binOnce sync.Once
	binDir  string
	binPath string
	binErr  error
)

func mcptaskdBin(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		binDir, binErr = os.MkdirTemp("", "mcptask-client-test-")
		if binErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "mcptaskd")
		cmd := exec.Command("go", "build", "-o", binPath, "github.com/mcptask/mcptask/cmd/mcptaskd")
		out, err := cmd.CombinedOutput()
		if err != nil {
			binErr = fmt.Errorf("building mcptaskd: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

// connectStdio runs mcptaskd -stdio on a fresh database and connects to it.
func connectStdio(t *testing.T, o *client.Options) *client.Client {
	t.Helper()
	cmd := exec.Command(mcptaskdBin(t), "-stdio", "-db", filepath.Join(t.TempDir(), "tasks.db"),
		"-poll-interval", "20ms", "-log-level", "warn")
	var stderr proctest.Buffer
	cmd.Stderr = &stderr
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, "stdio:mcptaskd", o)
	if err != nil {
		t.Fatalf("Connect over stdio: %v\n%s", err, stderr.String())
	}
	t.Cleanup(func() {
		c.Close()
		if t.Failed() {
			t.Logf("mcptaskd stderr:\n%s", stderr.String())
		}
	})
	return c
}

// waitFor polls cond until it holds or the timeout passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(5 * time.Millisecond) // poll interval, not synchronization
	}
}

// text returns the text of a result's first content block.
func text(res *mcp.CallToolResult) string {
	if res == nil || len(res.Content) == 0 {
		return ""
	}
	if tc, ok := res.Content[0].(*mcp.TextContent); ok {
		return tc.Text
	}
	return ""
}
