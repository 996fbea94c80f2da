// Package quota keeps per-requester limits in memory: token-bucket rate
// limiters (golang.org/x/time/rate) keyed by requester, and a tracker of
// task polling that raises the poll interval suggested to a requester who
// polls faster than told.
//
// Both forget requesters that have been idle long enough for forgetting to
// change nothing (a full bucket, a poll interval back to normal), so their
// memory stays bounded by the active requesters.
package quota

import (
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Limiters holds one token bucket per key (requester). A nil *Limiters
// allows everything.
type Limiters struct {
	limit rate.Limit
	burst int
	idle  time.Duration // after this long unused a bucket is full again

	mu      sync.Mutex
	buckets map[string]*bucket
	inserts int // since the last eviction pass
}

type bucket struct {
	lim      *rate.Limiter
	lastUsed time.Time
}

// NewLimiters returns limiters allowing perSecond events per second per
// key, with bursts of up to burst events (at least 1). It returns nil,
// which allows everything, if perSecond <= 0.
func NewLimiters(perSecond float64, burst int) *Limiters {
	if perSecond <= 0 {
		return nil
	}
	if burst < 1 {
		burst = 1
	}
	idle := time.Duration(float64(burst) / perSecond * float64(time.Second))
	return &Limiters{limit: rate.Limit(perSecond), burst: burst, idle: max(idle, time.Second), buckets: map[string]*bucket{}}
}

// evictEvery is how many new buckets are made between eviction passes.
const evictEvery = 1024

// Allow takes one token from key's bucket at now. If the bucket is empty
// it takes nothing and returns false and how long until a token is there.
func (l *Limiters) Allow(key string, now time.Time) (ok bool, retryAfter time.Duration) {
	ok, retryAfter, _ = l.Reserve(key, now)
	return ok, retryAfter
}

// Reserve is Allow whose token can be given back: undo (called once, when
// the event did not happen after all) returns it to the bucket, as far as
// the tokens taken since allow.
func (l *Limiters) Reserve(key string, now time.Time) (ok bool, retryAfter time.Duration, undo func()) {
	if l == nil {
		return true, 0, func() {}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.buckets[key]
	if b == nil {
		b = &bucket{lim: rate.NewLimiter(l.limit, l.burst), lastUsed: now}
		l.buckets[key] = b
		if l.inserts++; l.inserts >= evictEvery {
			l.evict(now)
		}
	}
	b.lastUsed = now
	r := b.lim.ReserveN(now, 1)
	if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now) // give the token back: a refused request costs nothing
		return false, d, func() {}
	}
	return true, 0, func() { r.CancelAt(now) }
}

// Empty reports whether key's bucket has no token at now, and how long
// until it has one. It takes nothing (a key without a bucket has a full
// one): for a limit that charges only some events, after the fact.
func (l *Limiters) Empty(key string, now time.Time) (empty bool, retryAfter time.Duration) {
	if l == nil {
		return false, 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.buckets[key]
	if b == nil {
		return false, 0
	}
	if tok := b.lim.TokensAt(now); tok < 1 {
		return true, time.Duration((1 - tok) / float64(l.limit) * float64(time.Second))
	}
	return false, 0
}

// evict forgets the buckets unused for long enough to be full again: a
// new bucket would behave the same.
func (l *Limiters) evict(now time.Time) {
	l.inserts = 0
	for k, b := range l.buckets {
		if now.Sub(b.lastUsed) > l.idle {
			delete(l.buckets, k)
		}
	}
}

// Len returns how many keys have a bucket (for tests and metrics).
func (l *Limiters) Len() int {
	if l == nil {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.buckets)
}

// Polls tracks how often each requester polls each task, to raise the
// poll interval suggested to a requester who ignores it: each poll that
// comes sooner than half the interval last suggested to that requester
// for that task doubles the interval suggested next (up to a maximum);
// each poll that keeps to the interval halves it again, down to the
// task's own. A nil *Polls never raises anything.
type Polls struct {
	max time.Duration

	mu      sync.Mutex
	m       map[pollKey]*pollState
	inserts int
}

type pollKey struct{ requester, task string }

type pollState struct {
	last      time.Time
	suggested time.Duration
}

// NewPolls returns a tracker that raises intervals up to maxInterval. It
// returns nil (no raising) if maxInterval <= 0.
func NewPolls(maxInterval time.Duration) *Polls {
	if maxInterval <= 0 {
		return nil
	}
	return &Polls{max: maxInterval, m: map[pollKey]*pollState{}}
}

// Interval records a poll of task by requester at now and returns the
// interval to suggest in the answer, given base, the interval the task
// itself suggests. It never returns less than base.
func (p *Polls) Interval(requester, task string, base time.Duration, now time.Time) time.Duration {
	if p == nil || base <= 0 {
		return base
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	k := pollKey{requester, task}
	st := p.m[k]
	if st == nil {
		st = &pollState{suggested: base, last: now}
		p.m[k] = st
		if p.inserts++; p.inserts >= evictEvery {
			p.evict(now)
		}
		return base
	}
	since := now.Sub(st.last)
	st.last = now
	switch {
	case since < st.suggested/2:
		st.suggested = min(max(st.suggested, base)*2, max(p.max, base))
	case since >= st.suggested:
		st.suggested = max(st.suggested/2, base)
	}
	if st.suggested < base {
		st.suggested = base
	}
	return st.suggested
}

// Peek returns the interval Interval would suggest to requester for task
// now, without recording a poll.
func (p *Polls) Peek(requester, task string, base time.Duration) time.Duration {
	if p == nil || base <= 0 {
		return base
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if st := p.m[pollKey{requester, task}]; st != nil && st.suggested > base {
		return st.suggested
	}
	return base
}

// evict forgets the polls older than twice the maximum interval: a
// requester back after that long is treated as new.
func (p *Polls) evict(now time.Time) {
	p.inserts = 0
	for k, st := range p.m {
		if now.Sub(st.last) > 2*p.max {
			delete(p.m, k)
		}
	}
}

// Millis returns d in whole milliseconds, rounded up, for retry hints.
func Millis(d time.Duration) int64 {
	return int64(math.Ceil(float64(d) / float64(time.Millisecond)))
}
