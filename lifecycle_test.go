package mcptask_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcptask/mcptask"
	"github.com/mcptask/mcptask/engine"
	"github.com/mcptask/mcptask/store/sqlite"
	"github.com/mcptask/mcptask/task"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func newEngine(t *testing.T) *engine.Engine {
	t.Helper()
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "tasks.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	eng, err := engine.New(engine.Options{Store: st, Logger: discard, Exclusive: true})
	if err != nil {
		t.Fatal(err)
	}
	return eng
}

func newMCPServer() *mcp.Server {
	return mcp.NewServer(&mcp.Implementation{Name: "t", Version: "1"}, &mcp.ServerOptions{Logger: discard})
}

type noArgs struct{}

func noop(context.Context, *mcp.CallToolRequest, noArgs) (*mcp.CallToolResult, any, error) {
	return &mcp.CallToolResult{}, nil, nil
}

// TestNewOnAnEngineWithAPolicy: a second Server on one engine would
// silently replace the first one's recovery policy (and its tools' say on
// re-runs); it is refused instead.
func TestNewOnAnEngineWithAPolicy(t *testing.T) {
	eng := newEngine(t)
	if _, err := mcptask.New(newMCPServer(), eng, nil); err != nil {
		t.Fatal(err)
	}
	_, err := mcptask.New(newMCPServer(), eng, nil)
	if err == nil || !strings.Contains(err.Error(), "recovery policy") {
		t.Fatalf("second New on one engine: err = %v, want a recovery-policy error", err)
	}
	// An engine given a policy of its own is refused too.
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "other.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	own, _ := engine.New(engine.Options{Store: st, Logger: discard})
	if err := own.SetHooks(engine.Hooks{Recover: func(context.Context, *task.Task) engine.Work { return nil }}); err != nil {
		t.Fatal(err)
	}
	if _, err := mcptask.New(newMCPServer(), own, nil); err == nil {
		t.Fatal("New on an engine with hooks of its own succeeded")
	}
}

// TestNewAfterEngineRun: the policy cannot be installed on a running
// engine, whose start-up recovery already ran without it.
func TestNewAfterEngineRun(t *testing.T) {
	eng := newEngine(t)
	if err := eng.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer eng.Shutdown(context.Background())
	if _, err := mcptask.New(newMCPServer(), eng, nil); err == nil {
		t.Fatal("New on a running engine succeeded")
	}
}

// TestRegisterAfterStart: registering a tool after Start would change the
// recovery policy under the engine's feet; it panics with a clear message.
func TestRegisterAfterStart(t *testing.T) {
	ts, err := mcptask.New(newMCPServer(), newEngine(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	mcptask.AddTool(ts, &mcp.Tool{Name: "before"}, noop, mcptask.ToolOptions{Support: mcptask.Optional, Rerunnable: true})
	if err := ts.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer ts.Close(context.Background())
	if err := ts.Start(context.Background()); err == nil {
		t.Error("a second Start succeeded")
	}
	for name, register := range map[string]func(){
		"AddTool":        func() { mcptask.AddTool(ts, &mcp.Tool{Name: "late"}, noop, mcptask.ToolOptions{Rerunnable: true}) },
		"SetTaskSupport": func() { ts.SetTaskSupport("before", mcptask.ToolOptions{}) },
	} {
		func() {
			defer func() {
				p := recover()
				if msg, _ := p.(string); !strings.Contains(msg, "after Server.Start") {
					t.Errorf("%s after Start: panic %v, want one saying it came after Server.Start", name, p)
				}
			}()
			register()
		}()
	}
}

// TestCloseStopsTheEngine: Close shuts the engine down, so it accepts no
// task; a second Close is a no-op.
func TestCloseStopsTheEngine(t *testing.T) {
	eng := newEngine(t)
	ts, err := mcptask.New(newMCPServer(), eng, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := ts.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := ts.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := ts.Close(context.Background()); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	_, err = eng.Start(context.Background(), engine.StartSpec{Tool: "x"}, func(context.Context) (json.RawMessage, error) { return nil, nil })
	if !errors.Is(err, engine.ErrClosed) {
		t.Fatalf("engine.Start after Close: %v, want ErrClosed", err)
	}
}

// TestConcurrentCloseWaits: every Close waits for the engine's shutdown,
// so a caller may close the store as soon as its own Close returns (a
// second Close returned at once while the first was still shutting down).
func TestConcurrentCloseWaits(t *testing.T) {
	eng := newEngine(t)
	ts, err := mcptask.New(newMCPServer(), eng, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := ts.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	var returned atomic.Bool
	started := make(chan struct{})
	if _, err := eng.Start(context.Background(), engine.StartSpec{Tool: "slow"}, func(ctx context.Context) (json.RawMessage, error) {
		close(started)
		<-ctx.Done()
		returned.Store(true)
		return nil, ctx.Err()
	}); err != nil {
		t.Fatal(err)
	}
	<-started
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			defer cancel()
			_ = ts.Close(ctx)
			if !returned.Load() {
				t.Error("Close returned while the engine was still shutting down (the task's work still ran)")
			}
		})
	}
	wg.Wait()
}
