package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/task"
)

// runBrowse checks [store.Browser]: every owner's tasks, filtered, newest
// first (ties by ID), in pages that neither skip nor repeat, with counts
// per status under the same filters.
func (s *suite) runBrowse(t *testing.T) {
	run(t, []testCase{
		{"Filters", s.browseFilters},
		{"DefaultLimit", s.browseDefaultLimit},
		{"BadCursor", s.browseBadCursor},
		{"CursorAfterDelete", s.browseCursorAfterDelete},
		{"Expired", s.browseExpired},
	})
}

// browserOf returns a fresh store that is a [store.Browser].
func (s *suite) browserOf(t *testing.T) (store.Store, store.Browser) {
	t.Helper()
	st := s.store(t)
	b := st
	return st, b
}

// browseFixture creates 60 tasks: three per creation time (ties broken by
// ID), created out of order, of owners alice, bob and anonymous, tools a
// and b, in every status and with every outcome (some completed tasks are
// tool errors).
func browseFixture(t *testing.T, st store.Store) []*task.Task {
	t.Helper()
	statuses := []task.Status{task.Working, task.Completed, task.InputRequired, task.Failed, task.Completed, task.Cancelled, task.Completed}
	owners := []task.Owner{"alice", "bob", "alice", ""}
	var all []*task.Task
	for i := range 60 {
		j := (i * 7) % 60 // out of creation order
		tk := newTask(owners[j%len(owners)], base.Add(time.Duration(j/3)*time.Second))
		tk.Tool = []string{"a", "b"}[j%2]
		tk.Status = statuses[j%len(statuses)]
		if tk.Status == task.Completed {
			tk.Result = json.RawMessage(`{"content":[]}`)
			if j%3 == 0 {
				tk.Result, tk.ToolError = json.RawMessage(`{"content":[],"isError":true}`), true
			}
		}
		mustCreate(t, st, tk)
		all = append(all, want(tk))
	}
	return all
}

// selects is the reference of BrowseQuery's filters (Cursor and Limit
// aside), on tasks as the store gives them back.
func selects(q store.BrowseQuery, tk *task.Task, withStatus bool) bool {
	switch {
	case withStatus && (len(q.Statuses) > 0 || len(q.Outcomes) > 0) &&
		!slices.Contains(q.Statuses, tk.Status) && !slices.Contains(q.Outcomes, tk.Outcome()):
		return false
	case q.Tool != "" && tk.Tool != q.Tool:
		return false
	case q.Owner != "" && tk.Owner != q.Owner:
		return false
	case !q.CreatedAfter.IsZero() && tk.CreatedAt.Before(q.CreatedAfter):
		return false
	case !q.CreatedBefore.IsZero() && !tk.CreatedAt.Before(q.CreatedBefore):
		return false
	}
	return true
}

// newestFirst sorts tasks as Browse returns them.
func newestFirst(tasks []*task.Task) {
	slices.SortFunc(tasks, func(a, b *task.Task) int {
		if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(string(b.ID), string(a.ID))
	})
}

// browseAll reads every page of q, checking that each but the last is
// full and has a cursor.
func browseAll(t *testing.T, b store.Browser, q store.BrowseQuery) []*task.Task {
	t.Helper()
	var all []*task.Task
	for page := 0; ; page++ {
		if page > 100 {
			t.Fatalf("Browse(%+v): more than 100 pages", q)
		}
		got, next, err := b.Browse(t.Context(), q)
		if err != nil {
			t.Fatalf("Browse(%+v): %v", q, err)
		}
		all = append(all, got...)
		if next == "" {
			return all
		}
		if len(got) != q.Limit {
			t.Fatalf("Browse(%+v): a page of %d tasks with a cursor; want %d", q, len(got), q.Limit)
		}
		q.Cursor = next
	}
}

func (s *suite) browseFilters(t *testing.T) {
	st, b := s.browserOf(t)
	all := browseFixture(t, st)
	at := func(sec int) time.Time { return base.Add(time.Duration(sec) * time.Second) }
	for _, q := range []store.BrowseQuery{
		{},
		{Statuses: []task.Status{task.Working}},
		{Statuses: []task.Status{task.Failed}},
		{Statuses: []task.Status{task.Completed, task.Cancelled}},
		{Statuses: []task.Status{task.Working, task.InputRequired}},
		{Statuses: []task.Status{task.InputRequired, task.Failed}},
		{Statuses: []task.Status{"no-such-status"}},
		{Tool: "a"},
		{Tool: "nope"},
		{Owner: "bob"},
		{Owner: "alice"},
		{CreatedAfter: at(5)},
		{CreatedBefore: at(12)},
		{CreatedAfter: ms(at(3)), CreatedBefore: ms(at(15))},
		{Tool: "b", Owner: "alice"},
		{Tool: "a", Statuses: []task.Status{task.Completed}, CreatedAfter: ms(at(2))},
		{Tool: "b", Owner: "bob", Statuses: []task.Status{task.Completed, task.Working, task.Failed}, CreatedAfter: ms(at(1)), CreatedBefore: ms(at(18))},
		{Outcomes: []task.Outcome{task.OutcomeToolError}},
		{Outcomes: []task.Outcome{task.OutcomeOK}},
		{Outcomes: []task.Outcome{task.OutcomeFailed, task.OutcomeToolError}},
		{Outcomes: []task.Outcome{task.OutcomeCancelled, task.OutcomeOK, task.OutcomeOK}},
		{Outcomes: []task.Outcome{"no-such-outcome"}},
		{Tool: "a", Outcomes: []task.Outcome{task.OutcomeFailed, task.OutcomeToolError}, CreatedAfter: ms(at(2))},
		{Statuses: []task.Status{task.Completed}, Outcomes: []task.Outcome{task.OutcomeToolError, task.OutcomeFailed}},
		{Statuses: []task.Status{task.Working, task.InputRequired}, Outcomes: []task.Outcome{task.OutcomeToolError}},
		{Owner: "bob", Statuses: []task.Status{task.Working}, Outcomes: []task.Outcome{task.OutcomeFailed, task.OutcomeToolError}, CreatedBefore: ms(at(15))},
	} {
		t.Run(fmt.Sprintf("%+v", q), func(t *testing.T) {
			var want []*task.Task
			wantCounts := store.Counts{ByStatus: map[task.Status]int64{}}
			for _, tk := range all {
				if selects(q, tk, true) {
					want = append(want, tk)
				}
				if selects(q, tk, false) {
					wantCounts.ByStatus[tk.Status]++
					if tk.ToolError {
						wantCounts.ToolErrors++
					}
				}
			}
			newestFirst(want)
			for _, limit := range []int{7, 500} {
				q := q
				q.Limit = limit
				got := browseAll(t, b, q)
				if !slices.Equal(ids(got), ids(want)) {
					t.Fatalf("Browse with limit %d = %v; want %v", limit, ids(got), ids(want))
				}
			}
			for i, tk := range browseAll(t, b, store.BrowseQuery{Statuses: q.Statuses, Outcomes: q.Outcomes, Tool: q.Tool, Owner: q.Owner,
				CreatedAfter: q.CreatedAfter, CreatedBefore: q.CreatedBefore, Limit: 500}) {
				checkTask(t, fmt.Sprintf("task %d browsed", i), tk, want[i])
			}
			// Statuses, Outcomes, Cursor and Limit are not counts' filters.
			cq := q
			cq.Cursor, cq.Limit = "garbage", 3
			counts, err := b.CountByStatus(t.Context(), cq)
			if err != nil {
				t.Fatalf("CountByStatus: %v", err)
			}
			if !maps.Equal(counts.ByStatus, wantCounts.ByStatus) || counts.ToolErrors != wantCounts.ToolErrors {
				t.Fatalf("CountByStatus = %v; want %v", counts, wantCounts)
			}
			// Each count stops at CountLimit.
			for _, limit := range []int64{1, 2} {
				cq.CountLimit = limit
				capped := store.Counts{ByStatus: map[task.Status]int64{}, ToolErrors: min(wantCounts.ToolErrors, limit)}
				for st, n := range wantCounts.ByStatus {
					capped.ByStatus[st] = min(n, limit)
				}
				counts, err := b.CountByStatus(t.Context(), cq)
				if err != nil {
					t.Fatalf("CountByStatus (limit %d): %v", limit, err)
				}
				if !maps.Equal(counts.ByStatus, capped.ByStatus) || counts.ToolErrors != capped.ToolErrors {
					t.Fatalf("CountByStatus (limit %d) = %v; want %v", limit, counts, capped)
				}
			}
		})
	}
}

func (s *suite) browseDefaultLimit(t *testing.T) {
	st, b := s.browserOf(t)
	browseFixture(t, st)
	got, next, err := b.Browse(t.Context(), store.BrowseQuery{})
	if err != nil || len(got) != store.DefaultBrowseLimit || next == "" {
		t.Fatalf("Browse without a limit: %d tasks, next %q, %v; want %d and a cursor", len(got), next, err, store.DefaultBrowseLimit)
	}
	got, next, err = b.Browse(t.Context(), store.BrowseQuery{Cursor: next, Limit: -1})
	if err != nil || len(got) != 10 || next != "" {
		t.Fatalf("second page: %d tasks, next %q, %v; want 10 and no cursor", len(got), next, err)
	}
	got, next, err = b.Browse(t.Context(), store.BrowseQuery{Limit: store.MaxBrowseLimit * 2})
	if err != nil || len(got) != 60 || next != "" {
		t.Fatalf("Browse with a huge limit: %d tasks, next %q, %v; want 60 and no cursor", len(got), next, err)
	}
}

func (s *suite) browseBadCursor(t *testing.T) {
	st, b := s.browserOf(t)
	browseFixture(t, st)
	_, good, err := b.Browse(t.Context(), store.BrowseQuery{Limit: 5})
	if err != nil || good == "" {
		t.Fatalf("Browse: %q, %v", good, err)
	}
	_, listCursor, err := st.List(t.Context(), "alice", "", 2)
	if err != nil || listCursor == "" {
		t.Fatalf("List: %q, %v", listCursor, err)
	}
	// Another store's cursor, at the same position.
	_, other := s.browserOf(t)
	for _, c := range []string{"x", "!!!", strings.Repeat("A", 80), good[:len(good)-2], good + "AA",
		good[:len(good)-1] + string(good[len(good)-1]^1), listCursor} {
		if _, _, err := b.Browse(t.Context(), store.BrowseQuery{Cursor: c}); !errors.Is(err, store.ErrBadCursor) {
			t.Errorf("Browse with cursor %q: %v; want store.ErrBadCursor", c, err)
		}
	}
	if _, _, err := other.Browse(t.Context(), store.BrowseQuery{Cursor: good}); !errors.Is(err, store.ErrBadCursor) {
		t.Errorf("Browse of another store with this one's cursor: %v; want store.ErrBadCursor", err)
	}
	// A cursor holds a position, whatever the filters.
	if _, _, err := b.Browse(t.Context(), store.BrowseQuery{Cursor: good, Tool: "a"}); err != nil {
		t.Errorf("Browse with a cursor and other filters: %v", err)
	}
}

func (s *suite) browseCursorAfterDelete(t *testing.T) {
	st, b := s.browserOf(t)
	d := deleterOf(t, st)
	all := browseFixture(t, st)
	newestFirst(all)
	page, next, err := b.Browse(t.Context(), store.BrowseQuery{Limit: 10})
	if err != nil || next == "" {
		t.Fatalf("Browse: %v, %v", next, err)
	}
	if err := d.Delete(t.Context(), page[9].ID); err != nil {
		t.Fatal(err)
	}
	rest := browseAll(t, b, store.BrowseQuery{Limit: 10, Cursor: next})
	if !slices.Equal(ids(rest), ids(all[10:])) {
		t.Fatalf("after deleting the task the cursor points after: %v; want %v", ids(rest), ids(all[10:]))
	}
	counts, err := b.CountByStatus(t.Context(), store.BrowseQuery{})
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, c := range counts.ByStatus {
		n += c
	}
	if n != 59 {
		t.Fatalf("CountByStatus after a deletion = %v (%d tasks); want 59", counts, n)
	}
}

// browseExpired: an expired task that DeleteExpired has not deleted yet
// is browsed and counted; once deleted, it is not.
func (s *suite) browseExpired(t *testing.T) {
	st, b := s.browserOf(t)
	tk := newTask("alice", base)
	tk.TTL = time.Minute
	if err := tk.Complete(nil, base); err != nil {
		t.Fatal(err)
	}
	live := newTask("bob", base.Add(time.Hour))
	mustCreate(t, st, tk, live)
	if !tk.Expired(base.Add(time.Hour)) {
		t.Fatal("the task is not expired")
	}
	got, _, err := b.Browse(t.Context(), store.BrowseQuery{Statuses: []task.Status{task.Completed}})
	if err != nil || len(got) != 1 || got[0].ID != tk.ID {
		t.Fatalf("Browse of the expired task: %v, %v", ids(got), err)
	}
	if n, err := st.DeleteExpired(t.Context(), base.Add(time.Hour)); err != nil || n != 1 {
		t.Fatalf("DeleteExpired = %d, %v", n, err)
	}
	got, _, err = b.Browse(t.Context(), store.BrowseQuery{})
	if err != nil || !slices.Equal(ids(got), []task.ID{live.ID}) {
		t.Fatalf("Browse after DeleteExpired: %v, %v; want %v", ids(got), err, live.ID)
	}
	counts, err := b.CountByStatus(t.Context(), store.BrowseQuery{})
	if err != nil || !maps.Equal(counts.ByStatus, map[task.Status]int64{task.Working: 1}) || counts.ToolErrors != 0 {
		t.Fatalf("CountByStatus after DeleteExpired = %v, %v", counts, err)
	}
}
