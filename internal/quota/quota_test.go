package quota

import (
	"fmt"
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func TestLimitersBurstThenRate(t *testing.T) {
	l := NewLimiters(10, 3) // 10/s: one token per 100 ms
	for i := range 3 {
		if ok, _ := l.Allow("alice", t0); !ok {
			t.Fatalf("burst event %d refused", i)
		}
	}
	ok, retry := l.Allow("alice", t0)
	if ok || retry != 100*time.Millisecond {
		t.Fatalf("4th event at once: ok=%v retry=%v, want refused with 100ms", ok, retry)
	}
	// A refusal costs nothing: after 100 ms exactly one more is allowed.
	if ok, _ := l.Allow("alice", t0.Add(100*time.Millisecond)); !ok {
		t.Fatal("event after 100ms refused")
	}
	if ok, _ := l.Allow("alice", t0.Add(100*time.Millisecond)); ok {
		t.Fatal("second event after 100ms allowed")
	}
	// Another key has its own bucket.
	if ok, _ := l.Allow("bob", t0); !ok {
		t.Fatal("bob refused because of alice")
	}
}

// TestLimitersReserveUndo: an undone reservation gives its token back;
// one kept does not.
func TestLimitersReserveUndo(t *testing.T) {
	l := NewLimiters(1, 1)
	ok, _, undo := l.Reserve("alice", t0)
	if !ok {
		t.Fatal("first reservation refused")
	}
	undo()
	ok, _, _ = l.Reserve("alice", t0)
	if !ok {
		t.Fatal("the token undone was not given back")
	}
	if ok, retry, _ := l.Reserve("alice", t0); ok || retry != time.Second {
		t.Fatalf("past the burst: ok=%v retry=%v", ok, retry)
	}
	var none *Limiters
	if ok, _, undo := none.Reserve("x", t0); !ok || undo == nil {
		t.Fatal("nil limiters refuse")
	}
}

func TestLimitersFloodKeepsRate(t *testing.T) {
	l := NewLimiters(50, 10)
	allowed := 0
	// 10 000 attempts over 2 s: at most burst + 2 s × rate pass.
	for i := range 10000 {
		if ok, _ := l.Allow("flooder", t0.Add(time.Duration(i)*200*time.Microsecond)); ok {
			allowed++
		}
	}
	if allowed > 10+100+1 || allowed < 100 {
		t.Fatalf("allowed %d of a 2 s flood at 50/s burst 10", allowed)
	}
}

func TestLimitersNilAndDisabled(t *testing.T) {
	var l *Limiters
	if ok, _ := l.Allow("x", t0); !ok || l.Len() != 0 {
		t.Fatal("nil limiters refused")
	}
	if NewLimiters(0, 10) != nil || NewLimiters(-1, 10) != nil {
		t.Fatal("a non-positive rate must disable the limit")
	}
}

func TestLimitersEvictIdle(t *testing.T) {
	l := NewLimiters(100, 1) // a bucket refills in 10 ms; idle after 1 s
	for i := range evictEvery - 1 {
		l.Allow(fmt.Sprint("old", i), t0)
	}
	l.Allow("fresh", t0.Add(2*time.Second)) // the 1024th insert: evicts the idle ones
	if n := l.Len(); n != 1 {
		t.Fatalf("%d buckets after eviction, want 1", n)
	}
}

func TestPollsRaiseAndRelax(t *testing.T) {
	p := NewPolls(8 * time.Second)
	base := time.Second
	now := t0
	poll := func(after time.Duration) time.Duration {
		now = now.Add(after)
		return p.Interval("alice", "task1", base, now)
	}
	if got := poll(0); got != base {
		t.Fatalf("first poll: %v", got)
	}
	// Ignoring the interval: each early poll doubles it, up to the max.
	var got []time.Duration
	for range 5 {
		got = append(got, poll(10*time.Millisecond))
	}
	want := []time.Duration{2 * time.Second, 4 * time.Second, 8 * time.Second, 8 * time.Second, 8 * time.Second}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("early polls got %v, want %v", got, want)
	}
	// A poll between half and all of the interval keeps it.
	if g := poll(5 * time.Second); g != 8*time.Second {
		t.Fatalf("poll after 5s of 8s: %v", g)
	}
	// Keeping to it halves it, down to the base.
	for _, w := range []time.Duration{4 * time.Second, 2 * time.Second, time.Second, time.Second} {
		if g := poll(8 * time.Second); g != w {
			t.Fatalf("polite poll: %v, want %v", g, w)
		}
	}
	// Other requesters and tasks are unaffected.
	if g := p.Interval("bob", "task1", base, now); g != base {
		t.Fatalf("bob: %v", g)
	}
	if g := p.Interval("alice", "task2", base, now); g != base {
		t.Fatalf("task2: %v", g)
	}
}

func TestPollsNeverBelowBase(t *testing.T) {
	p := NewPolls(time.Second) // a max below the task's own interval
	base := 5 * time.Second
	p.Interval("a", "t", base, t0)
	if g := p.Interval("a", "t", base, t0.Add(time.Millisecond)); g != base {
		t.Fatalf("got %v, want the base %v", g, base)
	}
	var nilP *Polls
	if g := nilP.Interval("a", "t", base, t0); g != base {
		t.Fatal("nil Polls changed the interval")
	}
}

func TestPollsEvict(t *testing.T) {
	p := NewPolls(time.Second)
	for i := range evictEvery - 1 {
		p.Interval("a", fmt.Sprint(i), time.Second, t0)
	}
	p.Interval("a", "new", time.Second, t0.Add(time.Minute))
	p.mu.Lock()
	n := len(p.m)
	p.mu.Unlock()
	if n != 1 {
		t.Fatalf("%d entries after eviction, want 1", n)
	}
}

func TestMillis(t *testing.T) {
	if Millis(1500*time.Microsecond) != 2 || Millis(time.Second) != 1000 || Millis(0) != 0 {
		t.Fatal("Millis")
	}
}

func TestLimitersEmpty(t *testing.T) {
	l := NewLimiters(1, 2)
	at := time.Unix(1000, 0)
	if empty, _ := l.Empty("a", at); empty {
		t.Fatal("a key never charged is empty")
	}
	l.Allow("a", at)
	if empty, _ := l.Empty("a", at); empty {
		t.Fatal("empty after one of two")
	}
	if empty, _ := l.Empty("a", at); empty || l.Len() != 1 {
		t.Fatal("Empty took a token, or made a bucket")
	}
	l.Allow("a", at)
	if empty, retry := l.Empty("a", at); !empty || retry != time.Second {
		t.Fatalf("after two of two: empty %v, retry %v; want true, 1s", empty, retry)
	}
	if empty, _ := l.Empty("a", at.Add(time.Second)); empty {
		t.Fatal("still empty once a token is back")
	}
}
