package engine_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/mcptask/mcptask/audit"
	"github.com/mcptask/mcptask/engine"
	"github.com/mcptask/mcptask/task"
)

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }
func (s *syncBuf) String() string              { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// TestLateResultIsRecorded: work that ignores its cancellation and
// completes after its task was cancelled leaves the stored status as it
// is, and the dropped outcome is logged and audited (outcome and status,
// no payload): the operator can see that the work went on. Work that stops
// as told leaves no such record.
func TestLateResultIsRecorded(t *testing.T) {
	var trail syncBuf
	e, st := newEngine(t, engine.Options{Audit: audit.New(slog.New(slog.NewJSONHandler(&trail, nil)))})
	ctx := context.Background()
	release := make(chan struct{})
	stubborn, err := e.Start(ctx, engine.StartSpec{Tool: "rollout"}, func(context.Context) (json.RawMessage, error) {
		<-release // ignores its context
		return json.RawMessage(`{"content":[{"type":"text","text":"secret payload"}]}`), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	obedient, err := e.Start(ctx, engine.StartSpec{Tool: "polite"}, func(ctx context.Context) (json.RawMessage, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []task.ID{stubborn.ID, obedient.ID} {
		if _, err := e.Cancel(ctx, "", id); err != nil {
			t.Fatal(err)
		}
	}
	close(release)
	if err := e.Shutdown(ctx); err != nil { // waits for both works
		t.Fatal(err)
	}
	if got, _ := st.Get(ctx, stubborn.ID); got.Status != task.Cancelled {
		t.Fatalf("the late result changed the status to %s", got.Status)
	}
	var records []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(trail.String()), "\n") {
		var r map[string]any
		if json.Unmarshal([]byte(line), &r) == nil && r["event"] == audit.EventLateResultDropped {
			records = append(records, r)
		}
	}
	if len(records) != 1 || records[0]["task"] != string(stubborn.ID) || records[0]["outcome"] != "completed" || records[0]["status"] != "cancelled" {
		t.Fatalf("late-result records: %v; want one for %s, outcome completed, status cancelled", records, stubborn.ID)
	}
	if strings.Contains(trail.String(), "secret payload") {
		t.Error("the audit trail holds the result's payload")
	}
}
