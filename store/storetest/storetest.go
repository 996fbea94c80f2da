// Package storetest is the shared test suite that every [store.Store]
// backend must pass. A backend's tests call [Run] with a [Backend] that
// says how to open its stores:
//
//	func TestStore(t *testing.T) {
//		storetest.Run(t, storetest.Backend{
//			Open: func(t *testing.T) store.Store {
//				s, err := mybackend.Open(...)
//				if err != nil {
//					t.Fatal(err)
//				}
//				return s
//			},
//			OpenShared: func(t *testing.T, st store.Store) store.Store {
//				// another store on st's tasks
//			},
//		})
//	}
//
// The suite has one sub-suite per area of the contract, each in a file of
// its own: Create, Get, Update, Integrity (what a store refuses, what it
// keeps byte for byte, writes that panic or whose context ends), List, Expiry, Idempotency, Quota, Queue
// ([store.Queuer]), Claim,
// Heartbeat, ChangeFeed ([store.ChangeFeed]), Ping ([store.Pinger]),
// Ledger ([store.Ledger]), Log ([store.TaskLogs]), Count
// ([store.Counter]), Browse ([store.Browser]), History
// ([store.Historian]), View ([store.Viewer]), Correlation (the host
// correlation keys of tasks and operations), Events ([store.Events]),
// Controls ([store.Controls]), and
// Extras (methods both backends keep outside the interface, which the
// suite also uses to set up some cases: Delete and ListActive). A
// sub-suite, or a case, that needs what a store does not implement is
// skipped.
//
// The suite never sleeps: time is passed to the store explicitly, and
// what it waits for (announcements of a change feed) it waits for on
// channels, with a deadline only to fail.
package storetest

import (
	"testing"

	"github.com/mcptask/mcptask/store"
)

// Backend says how the suite opens the stores of a backend.
type Backend struct {
	// Open returns a new store that holds no task and shares its tasks
	// with no other call of Open. The suite closes it when the subtest
	// ends, so the store's Close must tolerate being called again by
	// cleanup code that Open registered itself.
	Open func(t *testing.T) store.Store

	// OpenShared returns another store on the tasks of st, a store that
	// Open returned: the same SQLite file, the same PostgreSQL schema, as
	// another handle (or process) would open it. The suite closes it as
	// it closes the stores of Open. The cases that need two stores on one
	// task space (the change feed, the quota across stores) use it; nil
	// skips them.
	OpenShared func(t *testing.T, st store.Store) store.Store
}

// Run runs the suite: one subtest per area, each running its cases.
func Run(t *testing.T, b Backend) {
	t.Helper()
	if b.Open == nil {
		t.Fatal("storetest: Backend.Open is nil")
	}
	s := &suite{b: b}
	for _, area := range []struct {
		name string
		run  func(*testing.T)
	}{
		{"Create", s.runCreate},
		{"Get", s.runGet},
		{"Update", s.runUpdate},
		{"Integrity", s.runIntegrity},
		{"List", s.runList},
		{"Expiry", s.runExpiry},
		{"Idempotency", s.runIdempotency},
		{"Quota", s.runQuota},
		{"Queue", s.runQueue},
		{"Claim", s.runClaim},
		{"Heartbeat", s.runHeartbeat},
		{"ChangeFeed", s.runChangeFeed},
		{"Ping", s.runPing},
		{"Extras", s.runExtras},
		{"Ledger", s.runLedger},
		{"Log", s.runLog},
		{"Count", s.runCount},
		{"Browse", s.runBrowse},
		{"History", s.runHistory},
		{"View", s.runView},
		{"Correlation", s.runCorrelation},
		{"Events", s.runEvents},
		{"Controls", s.runControls},
		{"Trees", s.runTrees},
	} {
		t.Run(area.name, area.run)
	}
}

type suite struct {
	b Backend
}

// testCase is one case of an area's sub-suite.
type testCase struct {
	name string
	fn   func(*testing.T)
}

// run runs the cases of an area, each as a subtest.
func run(t *testing.T, cases []testCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, c.fn)
	}
}

// store opens a fresh store, closed when the test ends.
func (s *suite) store(t *testing.T) store.Store {
	t.Helper()
	return closeAtEnd(t, s.b.Open(t))
}

// shared opens another store on the tasks of st, closed when the test
// ends, or skips the test if the backend cannot.
func (s *suite) shared(t *testing.T, st store.Store) store.Store {
	t.Helper()
	if s.b.OpenShared == nil {
		t.Skip("storetest: Backend.OpenShared is nil: the backend opens no second store on one task space")
	}
	return closeAtEnd(t, s.b.OpenShared(t, st))
}

func closeAtEnd(t *testing.T, st store.Store) store.Store {
	t.Helper()
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return st
}
