package engine_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcptask/mcptask/audit"
	"github.com/mcptask/mcptask/engine"
	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/store/sqlite"
	"github.com/mcptask/mcptask/task"
)

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }
func (s *syncBuf) String() string              { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

func lateRecords(trail string) []map[string]any {
	var records []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(trail), "\n") {
		var r map[string]any
		if json.Unmarshal([]byte(line), &r) == nil && r["event"] == audit.EventLateResultDropped {
			records = append(records, r)
		}
	}
	return records
}

// TestLateResultIsRecorded: work that goes on after another engine took
// its task over (this engine was paused past its lease) and then
// completes leaves the stored state as it is, and the dropped outcome is
// logged and audited (outcome and status, never the payload): the operator
// can see that the work happened anyway. A task cancelled by its requester
// leaves no such record.
func TestLateResultIsRecorded(t *testing.T) {
	var trail syncBuf
	path := filepath.Join(t.TempDir(), "tasks.db")
	a, err := sqlite.Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := sqlite.Open(path, nil) // the other engine's handle on the file
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	e, err := engine.New(engine.Options{Store: a, Logger: slog.New(slog.DiscardHandler), SweepInterval: -1, Lease: time.Hour,
		Audit: audit.New(slog.New(slog.NewJSONHandler(&trail, nil)))})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	release := make(chan struct{})
	stubborn := func(context.Context) (json.RawMessage, error) {
		<-release // ignores its context, as paused work does
		return json.RawMessage(`{"content":[{"type":"text","text":"secret payload"}]}`), nil
	}
	rollout, err := e.Start(ctx, engine.StartSpec{Tool: "rollout"}, stubborn)
	if err != nil {
		t.Fatal(err)
	}
	cancelled, err := e.Start(ctx, engine.StartSpec{Tool: "polite"}, stubborn)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Cancel(ctx, "", cancelled.ID); err != nil {
		t.Fatal(err)
	}
	// Another engine takes the rollout over (its lease, seen from two
	// hours on, has expired) and fails it "outcome unknown".
	if got, err := b.Claim(ctx, store.ClaimRequest{Runner: "engine-b", Now: time.Now().Add(2 * time.Hour), Lease: time.Hour}); err != nil || len(got) != 1 || got[0].ID != rollout.ID {
		t.Fatalf("Claim = %v, %v", got, err)
	}
	if _, err := b.Update(ctx, rollout.ID, func(tk *task.Task) error {
		return tk.Fail(&task.Error{Code: engine.CodeOutcomeUnknown, Message: "outcome unknown"}, "outcome unknown", time.Now())
	}); err != nil {
		t.Fatal(err)
	}
	close(release)
	if err := e.Shutdown(ctx); err != nil { // waits for both works
		t.Fatal(err)
	}
	if got, _ := a.Get(ctx, rollout.ID); got.Status != task.Failed {
		t.Fatalf("the late result changed the status to %s", got.Status)
	}
	records := lateRecords(trail.String())
	if len(records) != 1 || records[0]["task"] != string(rollout.ID) || records[0]["outcome"] != "completed" || records[0]["status"] != "failed" {
		t.Fatalf("late-result records: %v; want one for %s, outcome completed, status failed", records, rollout.ID)
	}
	if strings.Contains(trail.String(), "secret payload") {
		t.Error("the audit trail holds the result's payload")
	}
}
