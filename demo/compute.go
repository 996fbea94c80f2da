package demo

import (
	"context"
	"fmt"
	"github.com/google/jsonschema-go/jsonschema"
	"github.com/mcptask/mcptask"
	"math"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Limits of long_computation's arguments.
const (
	maxPrimeLimit = 200_000_000
	maxSteps      = 10_000
	maxStepDelay  = 60_000 // ms
)

type computeArgs struct {
	N           int64 `json:"n,omitempty" jsonschema:"count the primes up to this number (2 to 200000000; default 1000000)"`
	Steps       int   `json:"steps,omitempty" jsonschema:"how many steps to split the work into (1 to 10000; default 10)"`
	StepDelayMs *int  `json:"step_delay_ms,omitempty" jsonschema:"pause after each step in milliseconds, to make the job visibly long (0 to 60000; default 500)"`
}

type computeOut struct {
	N      int64 `json:"n" jsonschema:"the upper bound"`
	Primes int64 `json:"primes" jsonschema:"how many primes are at most n"`
	Steps  int   `json:"steps" jsonschema:"how many steps the work took"`
}

func longComputation(ctx context.Context, _ *mcp.CallToolRequest, in computeArgs) (*mcp.CallToolResult, computeOut, error) {
	n := orDefault(in.N, 1_000_000)
	steps := orDefault(in.Steps, 10)
	delay := 500
	if in.StepDelayMs != nil {
		delay = *in.StepDelayMs
	}
	switch {
	case n < 2 || n > maxPrimeLimit:
		return nil, computeOut{}, fmt.Errorf("n must be between 2 and %d, got %d", maxPrimeLimit, n)
	case steps < 1 || steps > maxSteps:
		return nil, computeOut{}, fmt.Errorf("steps must be between 1 and %d, got %d", maxSteps, steps)
	case delay < 0 || delay > maxStepDelay:
		return nil, computeOut{}, fmt.Errorf("step_delay_ms must be between 0 and %d, got %d", maxStepDelay, delay)
	}
	count, err := countPrimes(ctx, n, steps, time.Duration(delay)*time.Millisecond)
	if err != nil {
		return nil, computeOut{}, err
	}
	out := computeOut{N: n, Primes: count, Steps: steps}
	progress(ctx, fmt.Sprintf("done: %d primes up to %d", count, n))
	return text(fmt.Sprintf("There are %d primes up to %d (computed in %d steps).", count, n, steps)), out, nil
}

// stepResult is what long_computation emits after each step.
type stepResult struct {
	Step   int   `json:"step"`
	Of     int   `json:"of"`
	Upto   int64 `json:"upto"`
	Primes int64 `json:"primes"`
}

// stepSchema is the OutputSchema of long_computation: its stepResult.
var stepSchema = &jsonschema.Schema{Type: "object", Required: []string{"step", "of", "upto", "primes"},
	Properties: map[string]*jsonschema.Schema{"step": {Type: "integer"}, "of": {Type: "integer"},
		"upto": {Type: "integer"}, "primes": {Type: "integer", Description: "primes counted so far"}}}

// countPrimes counts the primes in [2, n] with a segmented sieve over
// steps equal ranges, reporting "step k of N" before each and pausing
// delay after each. It stops with ctx's error when ctx is done.
func countPrimes(ctx context.Context, n int64, steps int, delay time.Duration) (int64, error) {
	base := smallPrimes(int64(math.Sqrt(float64(n))) + 1)
	span := (n - 1 + int64(steps) - 1) / int64(steps) // numbers per step, rounded up
	var count int64
	for k := range steps {
		lo := 2 + int64(k)*span
		hi := min(lo+span-1, n)
		progress(ctx, fmt.Sprintf("step %d of %d: sieving %d..%d (%d primes so far)", k+1, steps, lo, hi, count))
		if lo <= hi {
			c, err := sieveRange(ctx, base, lo, hi)
			if err != nil {
				return 0, err
			}
			count += c
		}
		// The step's result, as an intermediate result (MCP Events).
		if tk := mcptask.FromContext(ctx); tk != nil {
			_ = tk.Emit(ctx, stepResult{Step: k + 1, Of: steps, Upto: hi, Primes: count})
		}
		if err := sleep(ctx, delay); err != nil {
			return 0, err
		}
	}
	return count, nil
}

// smallPrimes returns the primes up to limit with a plain sieve.
func smallPrimes(limit int64) []int64 {
	composite := make([]bool, limit+1)
	var ps []int64
	for i := int64(2); i <= limit; i++ {
		if composite[i] {
			continue
		}
		ps = append(ps, i)
		for j := i * i; j <= limit; j += i {
			composite[j] = true
		}
	}
	return ps
}

// chunk bounds the memory of one sieve pass.
const chunk = 1 << 20

// sieveRange counts the primes in [lo, hi] using the base primes (all
// primes up to sqrt(hi)).
func sieveRange(ctx context.Context, base []int64, lo, hi int64) (int64, error) {
	var count int64
	composite := make([]bool, min(chunk, hi-lo+1))
	for start := lo; start <= hi; start += chunk {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		end := min(start+chunk-1, hi)
		seg := composite[:end-start+1]
		clear(seg)
		for _, p := range base {
			if p*p > end {
				break
			}
			first := max(p*p, (start+p-1)/p*p)
			for j := first; j <= end; j += p {
				seg[j-start] = true
			}
		}
		for _, c := range seg {
			if !c {
				count++
			}
		}
	}
	return count, nil
}
