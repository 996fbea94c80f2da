package demo

import (
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcptask/mcptask"
	"github.com/mcptask/mcptask/engine"
	"github.com/mcptask/mcptask/internal/testkit/wiretest"
	"github.com/mcptask/mcptask/store/sqlite"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// naivePrimes counts the primes up to n by trial division.
func naivePrimes(n int64) int64 {
	var c int64
	for i := int64(2); i <= n; i++ {
		p := true
		for d := int64(2); d*d <= i; d++ {
			if i%d == 0 {
				p = false
				break
			}
		}
		if p {
			c++
		}
	}
	return c
}

func TestCountPrimes(t *testing.T) {
	ctx := context.Background()
	for _, n := range []int64{2, 3, 4, 10, 97, 100, 101, 1000, 7919, 65536} {
		want := naivePrimes(n)
		for _, steps := range []int{1, 2, 3, 7, 100, 1000} {
			got, err := countPrimes(ctx, n, steps, 0)
			if err != nil || got != want {
				t.Errorf("countPrimes(%d, %d steps) = %d, %v; want %d", n, steps, got, err, want)
			}
		}
	}
	// Across sieve chunks (1<<20 numbers each).
	for _, tc := range []struct {
		n    int64
		want int64
	}{{1_000_000, 78498}, {3_000_000, 216816}, {10_000_000, 664579}} {
		for _, steps := range []int{1, 3} {
			if got, err := countPrimes(ctx, tc.n, steps, 0); err != nil || got != tc.want {
				t.Errorf("countPrimes(%d, %d steps) = %d, %v; want %d", tc.n, steps, got, err, tc.want)
			}
		}
	}
}

func TestCountPrimesHonoursCancellation(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := countPrimes(ctx, 1000, 3, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
	ctx, cancel = context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := countPrimes(ctx, 1000, 3, time.Hour); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("timed out: %v", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("countPrimes took %v to notice its context ended", d)
	}
}

func TestLongComputationValidates(t *testing.T) {
	ctx := context.Background()
	neg := -1
	for _, in := range []computeArgs{{N: 1}, {N: maxPrimeLimit + 1}, {Steps: -2}, {Steps: maxSteps + 1}, {StepDelayMs: &neg}} {
		if _, _, err := longComputation(ctx, nil, in); err == nil {
			t.Errorf("%+v: no error", in)
		}
	}
	zero := 0
	res, out, err := longComputation(ctx, nil, computeArgs{N: 30, Steps: 2, StepDelayMs: &zero})
	if err != nil || out.Primes != 10 || res.Content[0].(*mcp.TextContent).Text != "There are 10 primes up to 30 (computed in 2 steps)." {
		t.Fatalf("got %+v %+v %v", res, out, err)
	}
}

func TestLintLine(t *testing.T) {
	for _, tc := range []struct {
		line  string
		rules []string
	}{
		{"package x", nil},
		{"\tx := 1", nil},
		{"x := 1 ", []string{"trailing-whitespace"}},
		{"// TODO and FIXME", []string{"todo", "todo"}},
		{strings.Repeat("a", 101), []string{"line-length"}},
		{strings.Repeat("é", 100), nil},
		{" \tx", []string{"mixed-indent"}},
	} {
		var got []string
		for _, f := range lintLine(1, tc.line, 100) {
			got = append(got, f.Rule)
		}
		if strings.Join(got, ",") != strings.Join(tc.rules, ",") {
			t.Errorf("lintLine(%q) = %v, want %v", tc.line, got, tc.rules)
		}
	}
}

func TestFlakyMigrationReturnsJSONRPCError(t *testing.T) {
	zero := 0
	_, _, err := flakyMigration(context.Background(), nil, migrationArgs{Steps: 5, FailAtStep: 9, StepDelayMs: &zero})
	var je *jsonrpc.Error
	if !errors.As(err, &je) || je.Code != jsonrpc.CodeInternalError || !strings.Contains(je.Message, "failed at step 5 of 5") {
		t.Fatalf("got %v", err)
	}
	var data map[string]any
	if json.Unmarshal(je.Data, &data) != nil || data["failedStep"] != float64(5) {
		t.Fatalf("error data %s", je.Data)
	}
}

func TestDeployNeedsATask(t *testing.T) {
	if _, _, err := deployWithConfirmation(context.Background(), nil, deployArgs{Service: "api"}); err == nil {
		t.Fatal("deploy ran without a task")
	}
}

// newServer serves the demo tools over HTTP with tasks on a SQLite file.
func newServer(t *testing.T) *wiretest.Client {
	t.Helper()
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "tasks.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	eng, err := engine.New(engine.Options{Store: st, SweepInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "demo-test", Version: "1"}, nil)
	ts, err := mcptask.New(srv, eng, nil)
	if err != nil {
		t.Fatal(err)
	}
	Register(ts)
	if err := ts.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(ts.Handler(&mcp.StreamableHTTPOptions{Stateless: true}))
	t.Cleanup(func() {
		hs.Close()
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		ts.Close(ctx)
		st.Close()
	})
	return &wiretest.Client{URL: hs.URL, Tasks: true}
}

func start(t *testing.T, c *wiretest.Client, tool string, args map[string]any) string {
	t.Helper()
	tk, err := c.CallTool(context.Background(), tool, args)
	if err != nil || tk.TaskID == "" {
		t.Fatalf("%s: %+v %v", tool, tk, err)
	}
	return tk.TaskID
}

func wait(t *testing.T, c *wiretest.Client, id string, cond func(*wiretest.Task) bool) *wiretest.Task {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tk, err := c.WaitFor(ctx, id, cond)
	if err != nil {
		t.Fatal(err)
	}
	return tk
}

func resultText(t *testing.T, tk *wiretest.Task) (string, bool) {
	t.Helper()
	if tk.Status != "completed" {
		t.Fatalf("task %s: %+v", tk.Status, tk)
	}
	var r struct {
		Content []struct{ Text string }
		IsError bool
	}
	if err := json.Unmarshal(tk.Result, &r); err != nil || len(r.Content) == 0 {
		t.Fatalf("result %s: %v", tk.Result, err)
	}
	return r.Content[0].Text, r.IsError
}

func TestToolsAsTasks(t *testing.T) {
	c := newServer(t)
	ctx := context.Background()

	t.Run("deploy dismissed", func(t *testing.T) {
		id := start(t, c, "deploy_with_confirmation", map[string]any{"service": "db", "version": "9", "build_steps": 1, "step_delay_ms": 0})
		tk := wait(t, c, id, func(tk *wiretest.Task) bool { return tk.Status == "input_required" })
		for key := range tk.InputRequests {
			if err := c.Result(ctx, "tasks/update", map[string]any{"taskId": id, "inputResponses": map[string]any{key: map[string]any{"action": "cancel"}}}, nil); err != nil {
				t.Fatal(err)
			}
		}
		text, isErr := resultText(t, wait(t, c, id, wiretest.Terminal))
		if isErr || text != `Deployment of db@9 aborted: the confirmation was dismissed (action "cancel"). Nothing was rolled out.` {
			t.Fatalf("%q %v", text, isErr)
		}
	})

	t.Run("deploy not confirmed", func(t *testing.T) {
		id := start(t, c, "deploy_with_confirmation", map[string]any{"service": "db", "build_steps": 1, "step_delay_ms": 0})
		tk := wait(t, c, id, func(tk *wiretest.Task) bool { return tk.Status == "input_required" })
		for key := range tk.InputRequests {
			if err := c.Result(ctx, "tasks/update", map[string]any{"taskId": id, "inputResponses": map[string]any{
				key: map[string]any{"action": "accept", "content": map[string]any{"confirm": false}}}}, nil); err != nil {
				t.Fatal(err)
			}
		}
		text, _ := resultText(t, wait(t, c, id, wiretest.Terminal))
		if !strings.Contains(text, "aborted: the user did not confirm") {
			t.Fatalf("%q", text)
		}
	})

	t.Run("deploy cancelled while waiting", func(t *testing.T) {
		id := start(t, c, "deploy_with_confirmation", map[string]any{"service": "db", "build_steps": 1, "step_delay_ms": 0})
		wait(t, c, id, func(tk *wiretest.Task) bool { return tk.Status == "input_required" })
		if err := c.Result(ctx, "tasks/cancel", map[string]any{"taskId": id}, nil); err != nil {
			t.Fatal(err)
		}
		if tk := wait(t, c, id, wiretest.Terminal); tk.Status != "cancelled" {
			t.Fatalf("%+v", tk)
		}
	})

	t.Run("lint default sample", func(t *testing.T) {
		id := start(t, c, "lint_report", map[string]any{"line_delay_ms": 0})
		text, isErr := resultText(t, wait(t, c, id, wiretest.Terminal))
		if !isErr || !strings.HasPrefix(text, "Found 3 problems in 6 lines:") {
			t.Fatalf("%q %v", text, isErr)
		}
	})

	t.Run("invalid arguments", func(t *testing.T) {
		id := start(t, c, "long_computation", map[string]any{"n": 1})
		text, isErr := resultText(t, wait(t, c, id, wiretest.Terminal))
		if !isErr || !strings.Contains(text, "n must be between 2") {
			t.Fatalf("%q %v", text, isErr)
		}
	})

	t.Run("echo", func(t *testing.T) {
		res, err := c.CallTool(ctx, "echo", map[string]any{"text": "hi"})
		if err != nil || res.TaskID != "" || !strings.Contains(string(res.Content), `"hi"`) {
			t.Fatalf("%+v %v", res, err)
		}
	})
}
