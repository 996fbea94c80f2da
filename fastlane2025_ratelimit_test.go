package mcptask_test

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcptask/mcptask"
	"github.com/mcptask/mcptask/engine"
	"github.com/mcptask/mcptask/internal/testkit/wiretest"
	"github.com/mcptask/mcptask/store/sqlite"
	"github.com/mcptask/mcptask/task"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type countingStore struct {
	*sqlite.Store
	gets atomic.Int64
}

func (s *countingStore) Get(ctx context.Context, id task.ID) (*task.Task, error) {
	s.gets.Add(1)
	return s.Store.Get(ctx, id)
}

// TestFastLane2025ResultUnderRateLimit: a requester past its request
// rate costs no store read with its 2025-11-25 tasks/result, on the lane
// as on the go-sdk path (the lane would have to read the task to know
// whether it answers it: with a request rate, tasks/result stays on the
// go-sdk).
func TestFastLane2025ResultUnderRateLimit(t *testing.T) {
	reads := map[bool]int64{}
	for _, fast := range []bool{true, false} {
		g := &gates{}
		logger := slog.New(slog.NewTextHandler(io.Discard, nil))
		st, err := sqlite.Open(filepath.Join(t.TempDir(), "tasks.db"), nil)
		if err != nil {
			t.Fatal(err)
		}
		cs := &countingStore{Store: st}
		eng, err := engine.New(engine.Options{Store: cs, Logger: logger, SweepInterval: -1})
		if err != nil {
			t.Fatal(err)
		}
		srv := mcp.NewServer(&mcp.Implementation{Name: "test", Version: "1"}, &mcp.ServerOptions{Logger: logger})
		ts, err := mcptask.New(srv, eng, &mcptask.Options{Logger: logger, FastLane: fast,
			Limits: mcptask.Limits{RequestRate: 0.001, RequestBurst: 2}})
		if err != nil {
			t.Fatal(err)
		}
		registerTestTools(ts, g)
		if err := ts.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		hs := httptest.NewServer(ts.Handler(nil))
		t.Cleanup(func() {
			hs.CloseClientConnections()
			hs.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = ts.Close(ctx)
			_ = st.Close()
		})
		ctx := ctxT(t)
		s := &wiretest.Session{URL: hs.URL}
		if _, err := s.Initialize(ctx); err != nil {
			t.Fatal(err)
		}
		taskID := startTask25(t, ctx, s, "work", map[string]any{"label": "t"})
		time.Sleep(300 * time.Millisecond) // the task finishes
		limited := 0
		for range 2 + 20 {
			if _, err := s.Call(ctx, "tasks/result", map[string]any{"taskId": taskID}); err != nil {
				if !strings.Contains(err.Error(), "rate") {
					t.Fatalf("fast=%v: %v", fast, err)
				}
				limited++
			}
			if limited == 1 {
				cs.gets.Store(0)
				limited++
			}
		}
		reads[fast] = cs.gets.Load()
		t.Logf("fast=%v: %d store reads for ~20 rate-limited tasks/result", fast, reads[fast])
	}
	if reads[true] != reads[false] {
		t.Errorf("rate-limited tasks/result read the store %d times on the fast lane, %d times on the go-sdk path", reads[true], reads[false])
	}
}
