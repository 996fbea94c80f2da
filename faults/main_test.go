package faults_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcptask/mcptask/internal/testkit/clitest"
)

// The binaries under test, built once for the whole run.
var (
	cliBin    string // mcptask
	daemonBin string // mcptaskd
)

// The suite's seed: every random choice (kill moments, which calls run)
// comes from it, so a failing run is replayed with MCPTASK_FAULT_SEED.
var (
	seed  uint64
	rngMu sync.Mutex
	rng   *rand.Rand
)

// randN returns a random int in [0, n) from the suite's seeded source.
func randN(n int) int {
	rngMu.Lock()
	defer rngMu.Unlock()
	return rng.IntN(n)
}

// counts is what the suite checked, printed at the end.
var counts struct {
	faults     atomic.Int64 // faults injected: lost requests and replies, cuts, kills, restarts, full disks
	tasks      atomic.Int64 // tasks whose invariants were checked
	duplicates atomic.Int64 // calls that got more than one task
	lost       atomic.Int64 // acknowledged calls whose task is gone

	// MCP Events webhooks (webhooks_test.go): events the store holds,
	// delivered (distinct webhook-ids), delivered again, never delivered.
	eventsProduced, eventsDelivered, eventsDuplicated, eventsLost atomic.Int64
}

func TestMain(m *testing.M) {
	if os.Getenv("MCPTASK_FAULT_SUITE") != "1" {
		fmt.Println("fault suite SKIPPED: set MCPTASK_FAULT_SUITE=1 to run it (scripts/test.sh does, on its own: it restarts the PostgreSQL server of MCPTASK_TEST_POSTGRES_DSN)")
		os.Exit(0)
	}
	os.Exit(run(m))
}

func run(m *testing.M) int {
	seed = uint64(time.Now().UnixNano())
	if s := os.Getenv("MCPTASK_FAULT_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			fmt.Fprintf(os.Stderr, "MCPTASK_FAULT_SEED=%q: %v\n", s, err)
			return 2
		}
		seed = v
	}
	rng = rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	fmt.Printf("fault suite: seed %d (replay with MCPTASK_FAULT_SEED=%d)\n", seed, seed)

	bins, cleanup, err := clitest.Build("../cmd/mcptask", "../cmd/mcptaskd")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer cleanup()
	cliBin, daemonBin = bins[0], bins[1]

	code := m.Run()
	f, n, d, l := counts.faults.Load(), counts.tasks.Load(), counts.duplicates.Load(), counts.lost.Load()
	fmt.Printf("fault suite: %d faults injected, %d tasks checked, %d duplicates, %d lost (seed %d)\n", f, n, d, l, seed)
	ep, ed, edup, el := counts.eventsProduced.Load(), counts.eventsDelivered.Load(), counts.eventsDuplicated.Load(), counts.eventsLost.Load()
	fmt.Printf("fault suite: webhook events: %d produced, %d delivered, %d delivered again (at least once), %d lost\n", ep, ed, edup, el)
	if el > 0 {
		fmt.Println("fault suite: FAIL: lost webhook events must be 0")
		code = 1
	}
	if d > 0 || l > 0 {
		fmt.Println("fault suite: FAIL: duplicates and lost tasks must be 0")
		code = 1
	}
	if n == 0 && code == 0 {
		fmt.Println("fault suite: FAIL: no task was checked")
		code = 1
	}
	return code
}
