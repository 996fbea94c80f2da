package loadgen

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"
)

// FloodConfig configures [Flood].
type FloodConfig struct {
	// Victim is the client of the measured requester; Flooder the client
	// of the flooding one (another requester: see [ClientOptions].Requester).
	Victim, Flooder *Client
	// Flooders is the number of concurrent flooding callers, each sending
	// tasks/get as fast as it is answered.
	Flooders int
	// Load is the victim's tasks/get load: Concurrency callers, paced at
	// Rate requests per second in all (under the server's request rate,
	// so that the victim is never refused), for Duration (or Count
	// operations) per side — without and with the flood — split evenly
	// over the rounds.
	Load Load
	// Rounds interleaves the two sides: each round measures the victim
	// alone, then under the flood. Zero means 1.
	Rounds int
	// GetPool is the number of the victim's completed tasks its tasks/get
	// cycles through; they are created first, and count against the
	// victim's creation rate. Zero means 16.
	GetPool int
	// Warmup is the number of unmeasured plain calls (not rate limited)
	// before the first round. Zero means 50 per victim caller.
	Warmup int64
	// Ramp is how long the flood runs before the victim is measured under
	// it, so that the flooder's burst is spent. Zero means 200 ms.
	Ramp time.Duration
	// Idle waits until every task created so far has completed (the
	// tasks are waited for without tasks/get, which the rate limits).
	Idle func(ctx context.Context) error
	// Progress, if set, is told the victim's figures of each phase.
	Progress func(round int, phase string, s Stats)
}

// The phases of [Flood].
const (
	PhaseQuiet   = "quiet"
	PhaseFlooded = "flooded"
)

// FloodResult holds the victim's figures without and with the flood,
// measured in one run, their ratios, and what the flooder got.
type FloodResult struct {
	// Quiet and Flooded are the victim's served tasks/get; their Errors
	// are its refusals (any other error fails the run).
	Quiet   Stats `json:"quiet"`
	Flooded Stats `json:"flooded"`
	// VictimRefused counts the victim's requests refused as rate_limited
	// (both sides).
	VictimRefused int64 `json:"victimRefused"`
	// FlooderServed and FlooderRefused count the flooder's tasks/get
	// answered with the task and refused as rate_limited; FlooderTime is
	// how long the flood ran in all.
	FlooderServed  int64         `json:"flooderServed"`
	FlooderRefused int64         `json:"flooderRefused"`
	FlooderTime    time.Duration `json:"flooderNs"`
	Ratios         FloodRatios   `json:"ratios"`
}

// FloodRatios are the victim's flooded ÷ quiet figures: latency ratios
// (lower is better, 1 is parity) and the throughput ratio (paced: 1 when
// the victim keeps its pace).
type FloodRatios struct {
	P50        float64 `json:"p50"`
	P99        float64 `json:"p99"`
	Throughput float64 `json:"throughput"`
}

// Flood measures whether a requester flooding tasks/get slows down
// another one: the victim's paced tasks/get without and with the flood,
// in one run. Both clients must target a server with limits on and the
// requester header read (see [ServerOptions]).
func Flood(ctx context.Context, cfg FloodConfig) (*FloodResult, error) {
	v, f := cfg.Victim, cfg.Flooder
	conc := max(cfg.Load.Concurrency, 1)
	rounds := max(cfg.Rounds, 1)
	if cfg.GetPool <= 0 {
		cfg.GetPool = 16
	}
	if cfg.Warmup <= 0 {
		cfg.Warmup = 50 * int64(conc)
	}
	if cfg.Ramp <= 0 {
		cfg.Ramp = 200 * time.Millisecond
	}
	idle := cfg.Idle
	if idle == nil {
		return nil, errors.New("flood: Idle is required")
	}
	pool := make([]string, cfg.GetPool)
	for i := range pool {
		id, err := v.Create(ctx)
		if err != nil {
			return nil, fmt.Errorf("creating the victim's tasks: %w", err)
		}
		pool[i] = id
	}
	own, err := f.Create(ctx)
	if err != nil {
		return nil, fmt.Errorf("creating the flooder's task: %w", err)
	}
	if err := idle(ctx); err != nil {
		return nil, err
	}
	if s := Run(ctx, Load{Concurrency: conc, Count: cfg.Warmup}, func(ctx context.Context, _ int) error {
		return v.Plain(ctx)
	}); s.Errors > 0 {
		return nil, fmt.Errorf("warm-up: %d errors, first: %s", s.Errors, s.FirstError)
	}

	res := &FloodResult{}
	var victimRefused atomic.Int64
	var next atomic.Uint64
	victim := func(ctx context.Context, _ int) error {
		id := pool[next.Add(1)%uint64(len(pool))]
		st, err := v.Get(ctx, id)
		if errors.Is(err, ErrRateLimited) {
			victimRefused.Add(1)
		} else if err == nil && st != "completed" {
			err = fmt.Errorf("tasks/get of %s: status %s, want completed", id, st)
		}
		return err
	}
	var served, refused atomic.Int64
	flooder := func(ctx context.Context, _ int) error {
		_, err := f.Get(ctx, own)
		switch {
		case err == nil:
			served.Add(1)
		case errors.Is(err, ErrRateLimited):
			refused.Add(1)
			err = nil
		}
		return err
	}
	// flood starts the flooders; stop stops them and returns their
	// figures.
	flood := func() (stop func() Stats) {
		fctx, cancel := context.WithCancel(ctx)
		done := make(chan Stats, 1)
		var once sync.Once
		go func() {
			done <- Run(fctx, Load{Concurrency: max(cfg.Flooders, 1), Count: math.MaxInt64}, flooder)
		}()
		var s Stats
		return func() Stats {
			once.Do(func() { cancel(); s = <-done })
			return s
		}
	}

	per := Load{Concurrency: conc, Duration: cfg.Load.Duration / time.Duration(rounds), Rate: cfg.Load.Rate}
	if cfg.Load.Count > 0 {
		per.Duration = 0
		per.Count = max(cfg.Load.Count/int64(rounds), 1)
	}
	if per.Duration <= 0 && per.Count <= 0 {
		per.Count = int64(conc)
	}
	var quiet, flooded []Stats
	measure := func() (Stats, int64) {
		r0 := victimRefused.Load()
		s := Run(ctx, per, victim)
		return s, victimRefused.Load() - r0
	}
	check := func(r int, phase string, s Stats, refusals int64) error {
		if cfg.Progress != nil {
			cfg.Progress(r, phase, s)
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		// Refusals are counted and reported; any other error fails.
		if s.Errors > refusals {
			return fmt.Errorf("victim %s: %d errors, first: %s", phase, s.Errors, s.FirstError)
		}
		return nil
	}
	for r := range rounds {
		s, n := measure()
		if err := check(r, PhaseQuiet, s, n); err != nil {
			return nil, err
		}
		quiet = append(quiet, s)

		stop := flood()
		t := time.NewTimer(cfg.Ramp)
		select {
		case <-ctx.Done():
		case <-t.C:
		}
		t.Stop()
		s, n = measure()
		fs := stop()
		res.FlooderTime += fs.Elapsed
		if fs.Errors > 0 {
			return nil, fmt.Errorf("flooder: %d errors, first: %s", fs.Errors, fs.FirstError)
		}
		if err := check(r, PhaseFlooded, s, n); err != nil {
			return nil, err
		}
		flooded = append(flooded, s)
	}
	res.Quiet, res.Flooded = Combine(quiet...), Combine(flooded...)
	res.VictimRefused = victimRefused.Load()
	res.FlooderServed, res.FlooderRefused = served.Load(), refused.Load()
	res.Ratios = FloodRatios{
		P50: ratio(res.Flooded.P50, res.Quiet.P50),
		P99: ratio(res.Flooded.P99, res.Quiet.P99),
	}
	if res.Quiet.Throughput > 0 {
		res.Ratios.Throughput = res.Flooded.Throughput / res.Quiet.Throughput
	}
	return res, nil
}
