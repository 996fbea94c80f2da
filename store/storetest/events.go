package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/task"
)

// runEvents checks the event logs and the webhook outbox
// ([store.Events]): status events written with every status change (the
// outcome with it), output events appended in order, reads by owner,
// task and tool from a cursor, "now" and the age floor, a subscription's
// deliveries queued with each event (and replayed from a position),
// claimed under a lease (once across two stores), retried, given up as
// dead letters (the subscription suspended until refreshed), the cap of
// subscriptions per owner, another owner's subscription invisible, and
// the retention.
func (s *suite) runEvents(t *testing.T) {
	run(t, []testCase{
		{"StatusEvents", s.eventsStatus},
		{"Output", s.eventsOutput},
		{"Cursor", s.eventsCursor},
		{"NotBefore", s.eventsNotBefore},
		{"Deliveries", s.eventsDeliveries},
		{"Replay", s.eventsReplay},
		{"Owners", s.eventsOwners},
		{"Prune", s.eventsPrune},
		{"SharedClaim", s.eventsSharedClaim},
		{"GoWithTask", s.eventsGoWithTask},
		{"WithLog", s.eventsWithLog},
	})
}

// eventStore opens a store; every backend keeps events.
func (s *suite) eventStore(t *testing.T) (store.Store, store.Events) {
	t.Helper()
	st := s.store(t)
	ev, ok := st.(store.Events)
	if !ok {
		t.Fatalf("%T is not a store.Events", st)
	}
	return st, ev
}

func readAll(t *testing.T, ev store.Events, q store.EventQuery) []*store.Event {
	t.Helper()
	p, err := ev.ReadEvents(context.Background(), q)
	if err != nil {
		t.Fatalf("ReadEvents: %v", err)
	}
	return p.Events
}

func complete(t *testing.T, st store.Store, id task.ID, result string) {
	t.Helper()
	if _, err := st.Update(context.Background(), id, func(cur *task.Task) error {
		return cur.Complete(json.RawMessage(result), time.Now())
	}); err != nil {
		t.Fatalf("Update: %v", err)
	}
}

func (s *suite) eventsStatus(t *testing.T) {
	st, ev := s.eventStore(t)
	a := newTask("alice", base)
	b := newTask("alice", base)
	mustCreate(t, st, a, b)
	complete(t, st, a.ID, `{"content":[],"isError":true}`)
	complete(t, st, b.ID, `{"content":[]}`)
	got := readAll(t, ev, store.EventQuery{Owner: "alice", Kind: store.EventKindStatus})
	if len(got) != 4 {
		t.Fatalf("got %d status events, want 4 (two created, two completed)", len(got))
	}
	if got[0].Status != task.Working || got[0].TaskID != a.ID || got[0].Tool != "echo" {
		t.Errorf("first event = %+v, want a's creation (working, echo)", got[0])
	}
	if got[2].Status != task.Completed || got[2].Outcome != task.OutcomeToolError {
		t.Errorf("a's completion = %s/%s, want completed/tool_error", got[2].Status, got[2].Outcome)
	}
	if got[3].Outcome != task.OutcomeOK {
		t.Errorf("b's completion outcome = %s, want ok", got[3].Outcome)
	}
	for i := 1; i < len(got); i++ {
		if !got[i-1].Pos.Before(got[i].Pos) || got[i-1].ID() == got[i].ID() {
			t.Errorf("events %d and %d are not in order or share an ID", i-1, i)
		}
	}
	if n := len(readAll(t, ev, store.EventQuery{Owner: "bob", Kind: store.EventKindStatus})); n != 0 {
		t.Errorf("bob read %d of alice's events", n)
	}
	if n := len(readAll(t, ev, store.EventQuery{Owner: "alice", Kind: store.EventKindStatus, TaskID: b.ID})); n != 2 {
		t.Errorf("task filter: %d events, want 2", n)
	}
}

func (s *suite) eventsOutput(t *testing.T) {
	st, ev := s.eventStore(t)
	a := newTask("alice", base)
	mustCreate(t, st, a)
	ctx := context.Background()
	if err := ev.AppendEvents(ctx, a.ID, []store.OutputEvent{
		{Stream: "emit", Data: []byte(`{"stage":"build"}`)},
		{Stream: "stdout", Text: "line two"},
	}); err != nil {
		t.Fatalf("AppendEvents: %v", err)
	}
	got := readAll(t, ev, store.EventQuery{Owner: "alice", Kind: store.EventKindOutput})
	if len(got) != 2 || !sameJSON(got[0].Data, json.RawMessage(`{"stage":"build"}`)) || got[1].Text != "line two" || got[1].Data != nil {
		t.Fatalf("output events = %+v", got)
	}
	if got[0].Stream != "emit" || got[0].TaskID != a.ID || got[0].Tool != "echo" {
		t.Errorf("first output = %+v", got[0])
	}
	if n := len(readAll(t, ev, store.EventQuery{Owner: "alice", Kind: store.EventKindOutput, Tool: "other"})); n != 0 {
		t.Errorf("tool filter: %d events, want 0", n)
	}
	err := ev.AppendEvents(ctx, task.NewID(), []store.OutputEvent{{Text: "x"}})
	if !errors.Is(err, store.ErrNotFound) {
		t.Errorf("AppendEvents of an unknown task = %v, want ErrNotFound", err)
	}
}

func (s *suite) eventsCursor(t *testing.T) {
	st, ev := s.eventStore(t)
	ctx := context.Background()
	a := newTask("alice", base)
	mustCreate(t, st, a)
	head, err := ev.EventHead(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, text := range []string{"1", "2", "3"} {
		if err := ev.AppendEvents(ctx, a.ID, []store.OutputEvent{{Text: text}}); err != nil {
			t.Fatal(err)
		}
	}
	q := store.EventQuery{Owner: "alice", Kind: store.EventKindOutput, After: head, Limit: 2}
	p, err := ev.ReadEvents(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Events) != 2 || !p.More || p.Events[0].Text != "1" {
		t.Fatalf("first page: %d events, more %v", len(p.Events), p.More)
	}
	pos, err := store.ParseEventPos(p.Next.String())
	if err != nil || pos != p.Next {
		t.Fatalf("cursor round trip: %v %v", pos, err)
	}
	q.After = pos
	p, err = ev.ReadEvents(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Events) != 1 || p.More || p.Events[0].Text != "3" || p.Truncated {
		t.Fatalf("second page: %+v", p)
	}
	q.After = p.Next
	p, err = ev.ReadEvents(ctx, q)
	if err != nil || len(p.Events) != 0 || p.More {
		t.Fatalf("third page: %+v, %v", p, err)
	}
	if p.Next.Before(q.After) {
		t.Errorf("an empty page moved the cursor back")
	}
	// Other owners' events move the head; the cursor still reads alice's
	// next one.
	b := newTask("bob", base)
	mustCreate(t, st, b)
	if err := ev.AppendEvents(ctx, a.ID, []store.OutputEvent{{Text: "4"}}); err != nil {
		t.Fatal(err)
	}
	q.After = p.Next
	if got := readAll(t, ev, q); len(got) != 1 || got[0].Text != "4" {
		t.Fatalf("after an empty page: %v", got)
	}
	for _, bad := range []string{"", "x", "e1.a", "e2.0.1", "e1.-1.0", "e1.0.-5"} {
		if _, err := store.ParseEventPos(bad); err == nil {
			t.Errorf("ParseEventPos(%q) accepted", bad)
		}
	}
}

func (s *suite) eventsNotBefore(t *testing.T) {
	st, ev := s.eventStore(t)
	ctx := context.Background()
	a := newTask("alice", base)
	mustCreate(t, st, a)
	old := time.Now().Add(-time.Hour)
	if err := ev.AppendEvents(ctx, a.ID, []store.OutputEvent{{Text: "old", Time: old}, {Text: "new"}}); err != nil {
		t.Fatal(err)
	}
	p, err := ev.ReadEvents(ctx, store.EventQuery{Owner: "alice", Kind: store.EventKindOutput, NotBefore: time.Now().Add(-time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Events) != 1 || p.Events[0].Text != "new" || !p.Truncated {
		t.Fatalf("NotBefore: %d events, truncated %v", len(p.Events), p.Truncated)
	}
}

// newSub returns a subscription of owner to kind, every task.
func newSub(id string, owner task.Owner, kind store.EventKind) *store.Subscription {
	now := time.Now()
	return &store.Subscription{ID: id, Owner: owner, Name: "task." + string(kind), Args: "{}", Kind: kind,
		URL: "https://hooks.example/" + id, Secret: "whsec_c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0", Created: now, Refreshed: now,
		Expires: now.Add(time.Hour), Active: true}
}

func claim(t *testing.T, ev store.Events, now time.Time) []*store.Delivery {
	t.Helper()
	ds, err := ev.ClaimDeliveries(context.Background(), now, time.Minute, 10)
	if err != nil {
		t.Fatalf("ClaimDeliveries: %v", err)
	}
	return ds
}

func (s *suite) eventsDeliveries(t *testing.T) {
	st, ev := s.eventStore(t)
	ctx := context.Background()
	sub := newSub("sub_a", "alice", store.EventKindStatus)
	created, _, err := ev.PutSubscription(ctx, sub, 0)
	if err != nil || !created {
		t.Fatalf("PutSubscription = %v, %v", created, err)
	}
	if created, _, err := ev.PutSubscription(ctx, sub, 0); err != nil || created {
		t.Fatalf("refresh: created %v, %v", created, err)
	}
	other := newSub("sub_o", "alice", store.EventKindOutput)
	if _, _, err := ev.PutSubscription(ctx, other, 0); err != nil {
		t.Fatal(err)
	}
	a := newTask("alice", base)
	mustCreate(t, st, a)
	b := newTask("bob", base)
	mustCreate(t, st, b)
	now := time.Now().Add(time.Second)
	ds := claim(t, ev, now)
	if len(ds) != 1 || ds[0].Sub.ID != "sub_a" || ds[0].Event.TaskID != a.ID || ds[0].Event.Status != task.Working || ds[0].Attempts != 1 {
		t.Fatalf("claimed %d deliveries: %+v", len(ds), ds)
	}
	if ds[0].Sub.Secret != sub.Secret || ds[0].Sub.URL != sub.URL || ds[0].Watermark != ds[0].Event.Pos {
		t.Errorf("delivery details: %+v watermark %v", ds[0].Sub, ds[0].Watermark)
	}
	if again := claim(t, ev, now); len(again) != 0 {
		t.Fatalf("a leased delivery was claimed again")
	}
	d := ds[0]
	// A retry: due again at next, with its attempts counted.
	next := now.Add(10 * time.Second)
	if err := ev.FinishDelivery(ctx, d, store.DeliveryResult{Next: next, Error: "http_5xx", At: now}); err != nil {
		t.Fatal(err)
	}
	if got := claim(t, ev, now.Add(time.Second)); len(got) != 0 {
		t.Fatalf("a retry was claimed before it was due")
	}
	complete(t, st, a.ID, `{"content":[]}`)
	ds = claim(t, ev, next)
	if len(ds) != 2 {
		t.Fatalf("claimed %d, want the retry and the completion", len(ds))
	}
	var retry, done *store.Delivery
	for _, x := range ds {
		if x.Event.Status == task.Completed {
			done = x
		} else {
			retry = x
		}
	}
	if retry == nil || done == nil || retry.Attempts != 2 || done.Watermark != store.EventPos(retry.Event.Pos) && !done.Watermark.Before(done.Event.Pos) {
		t.Fatalf("retry %+v done %+v", retry, done)
	}
	if !done.Watermark.Before(done.Event.Pos) {
		t.Errorf("the watermark passed an undelivered older event")
	}
	if err := ev.FinishDelivery(ctx, done, store.DeliveryResult{Delivered: true, At: next}); err != nil {
		t.Fatal(err)
	}
	// A late attempt (another claim's attempt count) records nothing.
	late := *retry
	late.Attempts = 1
	if err := ev.FinishDelivery(ctx, &late, store.DeliveryResult{Delivered: true, At: next}); err != nil {
		t.Fatal(err)
	}
	if err := ev.FinishDelivery(ctx, retry, store.DeliveryResult{Dead: true, Suspend: true, Error: "http_4xx", At: next}); err != nil {
		t.Fatal(err)
	}
	dls, err := ev.DeadLetters(ctx, 10)
	if err != nil || len(dls) != 1 || dls[0].SubID != "sub_a" || dls[0].Error != "http_4xx" || dls[0].Attempts != 2 || dls[0].Event.TaskID != a.ID {
		t.Fatalf("DeadLetters = %+v, %v", dls, err)
	}
	pending, dead, err := ev.EventCounts(ctx)
	if err != nil || pending != 0 || dead != 1 {
		t.Fatalf("EventCounts = %d pending, %d dead, %v", pending, dead, err)
	}
	got, err := ev.GetSubscription(ctx, "alice", "sub_a")
	if err != nil || got.Active || got.LastError != "http_4xx" || got.FailedSince.IsZero() {
		t.Fatalf("after a dead letter: %+v, %v", got, err)
	}
	// Suspended: a new event waits until the client refreshes.
	c := newTask("alice", base)
	mustCreate(t, st, c)
	if got := claim(t, ev, next.Add(time.Second)); len(got) != 0 {
		t.Fatalf("a suspended subscription was delivered to")
	}
	if _, _, err := ev.PutSubscription(ctx, sub, 0); err != nil {
		t.Fatal(err)
	}
	if got := claim(t, ev, next.Add(time.Second)); len(got) != 1 || got[0].Event.TaskID != c.ID {
		t.Fatalf("after a refresh: %d deliveries", len(got))
	}
	// A final failure of one event (413) is a dead letter that leaves the
	// subscription active.
	d2 := newTask("alice", base)
	mustCreate(t, st, d2)
	got2 := claim(t, ev, next.Add(2*time.Second))
	if len(got2) != 1 {
		t.Fatalf("claimed %d", len(got2))
	}
	if err := ev.FinishDelivery(ctx, got2[0], store.DeliveryResult{Dead: true, Error: "http_4xx", At: next}); err != nil {
		t.Fatal(err)
	}
	if s, err := ev.GetSubscription(ctx, "alice", "sub_a"); err != nil || !s.Active {
		t.Fatalf("a final failure suspended the subscription: %+v %v", s, err)
	}
	if err := ev.DeleteSubscription(ctx, "alice", "sub_a"); err != nil {
		t.Fatal(err)
	}
	if pending, _, _ := ev.EventCounts(ctx); pending != 0 {
		t.Errorf("deliveries outlived their subscription: %d", pending)
	}
}

func (s *suite) eventsReplay(t *testing.T) {
	st, ev := s.eventStore(t)
	ctx := context.Background()
	a := newTask("alice", base)
	mustCreate(t, st, a)
	if err := ev.AppendEvents(ctx, a.ID, []store.OutputEvent{{Text: "before"}}); err != nil {
		t.Fatal(err)
	}
	sub := newSub("sub_r", "alice", store.EventKindOutput)
	sub.From = &store.EventPos{}
	created, truncated, err := ev.PutSubscription(ctx, sub, 0)
	if err != nil || !created || truncated {
		t.Fatalf("PutSubscription = %v %v %v", created, truncated, err)
	}
	ds := claim(t, ev, time.Now().Add(time.Second))
	if len(ds) != 1 || ds[0].Event.Text != "before" {
		t.Fatalf("replayed %d deliveries", len(ds))
	}
	// Capped per owner.
	if _, _, err := ev.PutSubscription(ctx, newSub("sub_r2", "alice", store.EventKindOutput), 1); !errors.Is(err, store.ErrTooManySubscriptions) {
		t.Errorf("beyond the cap: %v", err)
	}
	if _, _, err := ev.PutSubscription(ctx, sub, 1); err != nil {
		t.Errorf("a refresh at the cap: %v", err)
	}
}

func (s *suite) eventsOwners(t *testing.T) {
	_, ev := s.eventStore(t)
	ctx := context.Background()
	if _, _, err := ev.PutSubscription(ctx, newSub("sub_x", "alice", store.EventKindStatus), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := ev.GetSubscription(ctx, "bob", "sub_x"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("bob read alice's subscription: %v", err)
	}
	if err := ev.DeleteSubscription(ctx, "bob", "sub_x"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("bob deleted alice's subscription: %v", err)
	}
	if _, err := ev.GetSubscription(ctx, "alice", "sub_x"); err != nil {
		t.Errorf("alice's subscription: %v", err)
	}
}

func (s *suite) eventsPrune(t *testing.T) {
	st, ev := s.eventStore(t)
	ctx := context.Background()
	a := newTask("alice", base)
	mustCreate(t, st, a)
	old := time.Now().Add(-2 * time.Hour)
	if err := ev.AppendEvents(ctx, a.ID, []store.OutputEvent{{Text: "old", Time: old}}); err != nil {
		t.Fatal(err)
	}
	expired := newSub("sub_e", "alice", store.EventKindOutput)
	expired.Expires = time.Now().Add(-time.Minute)
	if _, _, err := ev.PutSubscription(ctx, expired, 0); err != nil {
		t.Fatal(err)
	}
	n, err := ev.PruneEvents(ctx, time.Now().Add(-time.Hour), time.Now())
	if err != nil || n < 1 {
		t.Fatalf("PruneEvents = %d, %v", n, err)
	}
	p, err := ev.ReadEvents(ctx, store.EventQuery{Owner: "alice", Kind: store.EventKindOutput})
	if err != nil || len(p.Events) != 0 || !p.Truncated {
		t.Fatalf("a reader behind the retention: %+v, %v", p, err)
	}
	if _, err := ev.GetSubscription(ctx, "alice", "sub_e"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("an expired subscription survived: %v", err)
	}
}

func (s *suite) eventsSharedClaim(t *testing.T) {
	st, ev := s.eventStore(t)
	ev2, ok := s.shared(t, st).(store.Events)
	if !ok {
		t.Fatal("the shared store is not a store.Events")
	}
	ctx := context.Background()
	if _, _, err := ev.PutSubscription(ctx, newSub("sub_s", "alice", store.EventKindStatus), 0); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		mustCreate(t, st, newTask("alice", base))
	}
	now := time.Now().Add(time.Second)
	seen := map[store.EventPos]bool{}
	for _, e := range []store.Events{ev, ev2, ev, ev2} {
		ds, err := e.ClaimDeliveries(ctx, now, time.Minute, 2)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range ds {
			if seen[d.Event.Pos] {
				t.Fatalf("event %v claimed twice", d.Event.Pos)
			}
			seen[d.Event.Pos] = true
		}
	}
	if len(seen) != 5 {
		t.Fatalf("claimed %d of 5 deliveries", len(seen))
	}
}

// eventsGoWithTask: deleting a task deletes its events (its outputs are
// its data), not other tasks'.
func (s *suite) eventsGoWithTask(t *testing.T) {
	st, ev := s.eventStore(t)
	ctx := context.Background()
	a, b := newTask("alice", base), newTask("alice", base)
	mustCreate(t, st, a, b)
	for _, id := range []task.ID{a.ID, b.ID} {
		if err := ev.AppendEvents(ctx, id, []store.OutputEvent{{Text: "secret of " + string(id)}}); err != nil {
			t.Fatal(err)
		}
	}
	complete(t, st, a.ID, `{"content":[]}`)
	if err := st.Delete(ctx, a.ID); err != nil {
		t.Fatal(err)
	}
	for _, kind := range []store.EventKind{store.EventKindOutput, store.EventKindStatus} {
		if got := readAll(t, ev, store.EventQuery{Owner: "alice", Kind: kind, TaskID: a.ID}); len(got) != 0 {
			t.Errorf("%d %s events outlived their task", len(got), kind)
		}
		if got := readAll(t, ev, store.EventQuery{Owner: "alice", Kind: kind, TaskID: b.ID}); len(got) == 0 {
			t.Errorf("the other task lost its %s events", kind)
		}
	}
}

// eventsWithLog: a log append carries the events emitted meanwhile, and
// the lines of the streams it publishes, in its transaction.
func (s *suite) eventsWithLog(t *testing.T) {
	st, ev := s.eventStore(t)
	ctx := context.Background()
	a := newTask("alice", base)
	mustCreate(t, st, a)
	lines := textLines("out line", "err line")
	lines[1].Stream = "stderr" // not published
	if err := st.AppendLog(ctx, a.ID, store.LogBatch{Lines: lines,
		Publish: []string{"stdout"}, Events: []store.OutputEvent{{Stream: "emit", Data: []byte(`{"n":1}`)}}}); err != nil {
		t.Fatal(err)
	}
	got := readAll(t, ev, store.EventQuery{Owner: "alice", Kind: store.EventKindOutput})
	if len(got) != 2 || got[0].Text != "out line" || got[0].Stream != "stdout" || !sameJSON(got[1].Data, []byte(`{"n":1}`)) {
		texts := []string{}
		for _, e := range got {
			texts = append(texts, e.Stream+":"+e.Text+string(e.Data))
		}
		t.Fatalf("output events %v", texts)
	}
}
