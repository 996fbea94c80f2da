package loadgen

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcptask/mcptask"
)

func start(t *testing.T) (*Server, *Client) {
	t.Helper()
	return startWith(t, nil)
}

func startWith(t *testing.T, opts *ServerOptions) (*Server, *Client) {
	t.Helper()
	srv, err := StartServer(filepath.Join(t.TempDir(), "tasks.db"), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Error(err)
		}
	})
	c, err := NewClient(srv.URL, ClientOptions{Conns: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return srv, c
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestClientOps(t *testing.T) {
	_, c := start(t)
	ctx := testCtx(t)
	if err := c.Plain(ctx); err != nil {
		t.Fatal(err)
	}
	id, err := c.Create(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.WaitCompleted(ctx, id); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(ctx, "no-such-task"); err == nil {
		t.Error("tasks/get of an unknown task succeeded")
	}
}

// TestServerLimits checks that StartServer applies its limits and audit
// options: UnrefusedLimits refuse nothing, tight limits refuse.
func TestServerLimits(t *testing.T) {
	ctx := testCtx(t)
	_, c := startWith(t, &ServerOptions{Limits: UnrefusedLimits(), Audit: true})
	for range 20 {
		id, err := c.Create(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.WaitCompleted(ctx, id); err != nil {
			t.Fatal(err)
		}
		for range 5 {
			if st, err := c.Get(ctx, id); err != nil || st != "completed" {
				t.Fatalf("tasks/get: %q, %v", st, err)
			}
		}
	}

	tight := mcptask.Limits{CreateRate: 0.001, CreateBurst: 1}
	_, c = startWith(t, &ServerOptions{Limits: tight, Audit: true})
	if _, err := c.Create(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Create(ctx); err == nil || !strings.Contains(err.Error(), "rate") {
		t.Errorf("second creation with a burst of 1: %v, want refused", err)
	}
}

func TestCompareSmoke(t *testing.T) {
	srv, c := start(t)
	cmp, err := Compare(testCtx(t), c, CompareConfig{
		Load:    Load{Concurrency: 2, Count: 8},
		Rounds:  2,
		Warmup:  2,
		GetPool: 2,
		Idle:    srv.WaitIdle,
	})
	if err != nil {
		t.Fatal(err)
	}
	for name, s := range map[string]Stats{"plain": cmp.Plain, "get": cmp.Get, "create": cmp.Create} {
		if s.Ops != 8 || s.Errors != 0 || s.P50 <= 0 || s.P99 < s.P50 || s.Throughput <= 0 {
			t.Errorf("%s: %+v", name, s)
		}
	}
	if cmp.Ratios.GetP50 <= 0 || cmp.Ratios.CreateThroughput <= 0 {
		t.Errorf("ratios: %+v", cmp.Ratios)
	}
}

func TestMemorySmoke(t *testing.T) {
	srv, c := start(t)
	pts, err := Memory(testCtx(t), srv, c, MemoryConfig{Points: []int64{3, 10}, Concurrency: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(pts) != 2 || pts[0].Tasks != 3 || pts[1].Tasks != 10 || pts[1].HeapInuse == 0 || pts[1].DBBytes == 0 {
		t.Fatalf("points: %+v", pts)
	}
}

func TestCheckLoopback(t *testing.T) {
	for _, u := range []string{"http://127.0.0.1:8080/mcp", "http://localhost/mcp", "http://[::1]:1/mcp", "https://127.0.0.2/x"} {
		if err := CheckLoopback(u); err != nil {
			t.Errorf("%s: %v", u, err)
		}
	}
	for _, u := range []string{"http://example.com/mcp", "http://10.0.0.1:8080/mcp", "ftp://127.0.0.1/", "127.0.0.1:8080", "http://localhost.evil.com/"} {
		if err := CheckLoopback(u); err == nil {
			t.Errorf("%s: accepted", u)
		} else if u == "http://example.com/mcp" && !errors.Is(err, ErrNotLoopback) {
			t.Errorf("%s: %v", u, err)
		}
	}
}

func TestPercentile(t *testing.T) {
	var lat []time.Duration
	for i := 1; i <= 100; i++ {
		lat = append(lat, time.Duration(i))
	}
	if p := Percentile(lat, 0.5); p != 50 {
		t.Errorf("p50 = %v", p)
	}
	if p := Percentile(lat, 0.99); p != 99 {
		t.Errorf("p99 = %v", p)
	}
	if p := Percentile(lat[:1], 0.99); p != 1 {
		t.Errorf("p99 of one = %v", p)
	}
}
