package loadgen

import (
	"context"
	"errors"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Op is one operation of a load: worker is the caller's index, in
// [0, concurrency).
type Op func(ctx context.Context, worker int) error

// Load is how much load [Run] offers.
type Load struct {
	// Concurrency is the number of concurrent callers (closed loop: each
	// sends its next request when the previous one is answered).
	Concurrency int
	// Duration bounds the run; zero means no time bound.
	Duration time.Duration
	// Count bounds the number of operations; zero means no count bound.
	// With neither bound, Run does one operation per caller.
	Count int64
	// Rate, if positive, paces the callers: together they start at most
	// Rate operations per second, each caller one every
	// Concurrency ÷ Rate seconds (staggered), or at once when its previous
	// operation took longer (no catching up). The latency is measured from
	// the start of the operation, not from its slot. Zero means no pacing.
	Rate float64
}

// Stats are the figures of one run.
type Stats struct {
	Ops        int64         `json:"ops"`
	Errors     int64         `json:"errors"`
	FirstError string        `json:"firstError,omitempty"`
	Elapsed    time.Duration `json:"elapsedNs"`
	// Throughput is successful operations per second of wall time.
	Throughput float64       `json:"opsPerSec"`
	Mean       time.Duration `json:"meanNs"`
	P50        time.Duration `json:"p50Ns"`
	P90        time.Duration `json:"p90Ns"`
	P99        time.Duration `json:"p99Ns"`
	Max        time.Duration `json:"maxNs"`

	lat []time.Duration // sorted latencies of the successful operations
}

// Run runs op under load and returns its figures. It stops early, with
// the figures so far, when ctx is done.
func Run(ctx context.Context, l Load, op Op) Stats {
	c := max(l.Concurrency, 1)
	if l.Duration <= 0 && l.Count <= 0 {
		l.Count = int64(c)
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var deadline time.Time
	if l.Duration > 0 {
		deadline = time.Now().Add(l.Duration)
	}
	var (
		claimed  atomic.Int64
		errs     atomic.Int64
		firstErr atomic.Pointer[error]
		wg       sync.WaitGroup
		per      = make([][]time.Duration, c)
	)
	start := time.Now()
	for w := range c {
		wg.Add(1)
		go func() {
			defer wg.Done()
			lat := make([]time.Duration, 0, 1024)
			var every time.Duration
			var next time.Time
			if l.Rate > 0 {
				every = time.Duration(float64(c) / l.Rate * float64(time.Second))
				next = start.Add(every * time.Duration(w) / time.Duration(c))
			}
			for runCtx.Err() == nil {
				if every > 0 {
					if !deadline.IsZero() && !next.Before(deadline) {
						break
					}
					if !sleepUntil(runCtx, next) {
						break
					}
					next = next.Add(every)
				}
				if l.Count > 0 && claimed.Add(1) > l.Count {
					break
				}
				t0 := time.Now()
				err := op(runCtx, w)
				t1 := time.Now()
				if err != nil {
					if runCtx.Err() != nil && errors.Is(err, runCtx.Err()) {
						break // cut short by the end of the run
					}
					errs.Add(1)
					firstErr.CompareAndSwap(nil, &err)
				} else {
					lat = append(lat, t1.Sub(t0))
				}
				if !deadline.IsZero() && !t1.Before(deadline) {
					break
				}
				if every > 0 && next.Before(t1) {
					next = t1 // behind its pace: no burst to catch up
				}
			}
			per[w] = lat
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	s := Merge(per...)
	s.Elapsed = elapsed
	s.Errors = errs.Load()
	if p := firstErr.Load(); p != nil {
		s.FirstError = (*p).Error()
	}
	if elapsed > 0 {
		s.Throughput = float64(s.Ops) / elapsed.Seconds()
	}
	return s
}

// sleepUntil waits until t, or returns false when ctx is done first.
func sleepUntil(ctx context.Context, t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err() == nil
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-tm.C:
		return true
	}
}

// Merge computes the latency figures of the given latencies (Elapsed,
// Throughput and Errors are left zero).
func Merge(lats ...[]time.Duration) Stats {
	var all []time.Duration
	for _, l := range lats {
		all = append(all, l...)
	}
	slices.Sort(all)
	s := Stats{Ops: int64(len(all)), lat: all}
	if len(all) == 0 {
		return s
	}
	var sum time.Duration
	for _, d := range all {
		sum += d
	}
	s.Mean = sum / time.Duration(len(all))
	s.P50 = Percentile(all, 0.50)
	s.P90 = Percentile(all, 0.90)
	s.P99 = Percentile(all, 0.99)
	s.Max = all[len(all)-1]
	return s
}

// Combine merges the figures of several runs of the same operation (e.g.
// the rounds of an interleaved measurement): latencies are pooled and the
// throughput is total operations over total time.
func Combine(runs ...Stats) Stats {
	lats := make([][]time.Duration, len(runs))
	var elapsed time.Duration
	var errs int64
	first := ""
	for i, r := range runs {
		lats[i] = r.lat
		elapsed += r.Elapsed
		errs += r.Errors
		if first == "" {
			first = r.FirstError
		}
	}
	s := Merge(lats...)
	s.Elapsed, s.Errors, s.FirstError = elapsed, errs, first
	if elapsed > 0 {
		s.Throughput = float64(s.Ops) / elapsed.Seconds()
	}
	return s
}

// Percentile returns the p-quantile (0 < p <= 1) of sorted latencies by
// the nearest-rank method, or 0 for none.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(p*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}
