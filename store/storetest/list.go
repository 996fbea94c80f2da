package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/task"
)

// runList checks List: an owner's tasks, newest first, in pages that
// neither skip nor repeat, with cursors that only the store issues.
func (s *suite) runList(t *testing.T) {
	run(t, []testCase{
		{"Pages", s.list},
		{"SameCreatedAt", s.listSameCreatedAt},
		{"Empty", s.listEmpty},
		{"BadCursor", s.listBadCursor},
	})
}

func (s *suite) list(t *testing.T) {
	st := s.store(t)
	var alice, bob []*task.Task
	// Create out of time order, interleaving owners.
	for i := range 25 {
		created := base.Add(time.Duration((i*7)%25) * time.Second)
		a := newTask("alice", created)
		a.Result = json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))
		alice = append(alice, a)
		mustCreate(t, st, a)
		if i%3 == 0 {
			b := newTask("bob", created)
			bob = append(bob, b)
			mustCreate(t, st, b)
		}
	}
	anon := newTask("", base)
	mustCreate(t, st, anon)

	sorted := slices.Clone(alice)
	slices.SortStableFunc(sorted, func(a, b *task.Task) int { return b.CreatedAt.Compare(a.CreatedAt) })

	// Pages of 10: 10, 10, 5.
	page1, next, err := st.List(t.Context(), "alice", "", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(page1) != 10 || next == "" {
		t.Fatalf("first page: %d tasks, next %q; want 10 and a cursor", len(page1), next)
	}
	page2, next, err := st.List(t.Context(), "alice", next, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(page2) != 10 || next == "" {
		t.Fatalf("second page: %d tasks, next %q; want 10 and a cursor", len(page2), next)
	}
	page3, next, err := st.List(t.Context(), "alice", next, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(page3) != 5 || next != "" {
		t.Fatalf("third page: %d tasks, next %q; want 5 and no cursor", len(page3), next)
	}
	all := slices.Concat(page1, page2, page3)
	if !slices.Equal(ids(all), ids(sorted)) {
		t.Errorf("List order = %v, want newest first %v", ids(all), ids(sorted))
	}
	checkSameSet(t, "alice's pages", all, alice)
	checkNewestFirst(t, all)
	for _, got := range all {
		i := slices.IndexFunc(alice, func(tk *task.Task) bool { return tk.ID == got.ID })
		if i >= 0 {
			checkTask(t, "listed task", got, want(alice[i]))
		}
	}

	// Other page sizes see the same sequence.
	for _, limit := range []int{1, 3, 24, 25, 26, 100} {
		if got := listAll(t, st, "alice", limit); !slices.Equal(ids(got), ids(sorted)) {
			t.Errorf("List with limit %d = %v, want %v", limit, ids(got), ids(sorted))
		}
	}

	bobs := listAll(t, st, "bob", 4)
	checkSameSet(t, "bob's tasks", bobs, bob)
	checkNewestFirst(t, bobs)
	checkSameSet(t, "the anonymous owner's tasks", listAll(t, st, "", 10), []*task.Task{anon})

	// A page boundary survives creations and deletions in between.
	page1, next, err = st.List(t.Context(), "alice", "", 10)
	if err != nil {
		t.Fatal(err)
	}
	mustCreate(t, st, newTask("alice", base.Add(time.Hour))) // newer than everything: not on later pages
	if err := deleterOf(t, st).Delete(t.Context(), page1[len(page1)-1].ID); err != nil {
		t.Fatal(err)
	}
	rest, _, err := st.List(t.Context(), "alice", next, 100)
	if err != nil {
		t.Fatalf("List after the cursor's own task was deleted: %v", err)
	}
	if !slices.Equal(ids(rest), ids(sorted[10:])) {
		t.Errorf("List after changes = %v, want %v", ids(rest), ids(sorted[10:]))
	}
}

func (s *suite) listSameCreatedAt(t *testing.T) {
	st := s.store(t)
	// Many tasks in the same millisecond: pagination must still neither
	// skip nor repeat.
	var tasks []*task.Task
	for i := range 13 {
		tk := newTask("alice", base.Add(time.Duration(i%3)*time.Microsecond))
		tasks = append(tasks, tk)
		mustCreate(t, st, tk)
	}
	for _, limit := range []int{1, 2, 5} {
		got := listAll(t, st, "alice", limit)
		checkSameSet(t, fmt.Sprintf("limit %d", limit), got, tasks)
		if first := listAll(t, st, "alice", 13); !slices.Equal(ids(got), ids(first)) {
			t.Errorf("limit %d order %v differs from one page %v", limit, ids(got), ids(first))
		}
	}
}

func (s *suite) listEmpty(t *testing.T) {
	st := s.store(t)
	tasks, next, err := st.List(t.Context(), "nobody", "", 10)
	if err != nil || len(tasks) != 0 || next != "" {
		t.Errorf("List of an empty store = %v, %q, %v", tasks, next, err)
	}
	mustCreate(t, st, newTask("alice", base))
	tasks, next, err = st.List(t.Context(), "bob", "", 10)
	if err != nil || len(tasks) != 0 || next != "" {
		t.Errorf("List of another owner = %v, %q, %v", tasks, next, err)
	}
}

func (s *suite) listBadCursor(t *testing.T) {
	st := s.store(t)
	for i := range 5 {
		mustCreate(t, st, newTask("alice", base.Add(time.Duration(i)*time.Second)))
	}
	_, cursor, err := st.List(t.Context(), "alice", "", 2)
	if err != nil || cursor == "" {
		t.Fatalf("List = %q, %v; want a cursor", cursor, err)
	}
	if _, _, err := st.List(t.Context(), "alice", cursor, 2); err != nil {
		t.Fatalf("List with a valid cursor: %v", err)
	}
	bad := []string{
		"garbage",
		"!!!!",
		"%00",
		"0",
		"{}",
		strings.Repeat("A", 64),
		cursor[:len(cursor)-1],
		cursor[:len(cursor)/2],
		cursor + "A",
		cursor + cursor,
		" " + cursor,
	}
	for _, i := range []int{0, len(cursor) / 3, len(cursor) / 2, 2 * len(cursor) / 3} {
		b := []byte(cursor)
		if b[i] == 'A' {
			b[i] = 'B'
		} else {
			b[i] = 'A'
		}
		bad = append(bad, string(b))
	}
	for _, c := range bad {
		tasks, next, err := st.List(t.Context(), "alice", c, 2)
		if !errors.Is(err, store.ErrBadCursor) {
			t.Errorf("List with cursor %q: err = %v, want store.ErrBadCursor", c, err)
		}
		if len(tasks) != 0 || next != "" {
			t.Errorf("List with cursor %q returned %d tasks, next %q", c, len(tasks), next)
		}
	}
	// A cursor is bound to the listing that issued it.
	if _, _, err := st.List(t.Context(), "bob", cursor, 2); !errors.Is(err, store.ErrBadCursor) {
		t.Errorf("List of another owner with alice's cursor: err = %v, want store.ErrBadCursor", err)
	}
}
