package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"sync"
	"testing"
)

// TestFailedWriteKeepsNothing: an op that wrote and then failed leaves
// nothing in the file, whether it was alone in its batch (no savepoint:
// the transaction is rolled back) or batched with others (rolled back to
// its savepoint, the others kept); and the writer goes on writing.
func TestFailedWriteKeepsNothing(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "tasks.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	boom := errors.New("boom")
	put := func(key string, fail bool) error {
		return s.write(ctx, func(tx *sql.Tx) error {
			if _, err := tx.ExecContext(ctx, `INSERT INTO meta (key, value) VALUES (?, x'00')`, key); err != nil {
				return err
			}
			if fail {
				return boom
			}
			return nil
		})
	}
	has := func(key string) bool {
		var n int
		if err := s.rdb.QueryRowContext(ctx, `SELECT count(*) FROM meta WHERE key = ?`, key).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 1
	}
	if err := put("alone-failed", true); !errors.Is(err, boom) {
		t.Fatalf("a failing lone write: %v", err)
	}
	if err := put("alone-kept", false); err != nil {
		t.Fatalf("the next write: %v", err)
	}
	if has("alone-failed") || !has("alone-kept") {
		t.Fatalf("after a lone failed write: failed kept %v, next kept %v", has("alone-failed"), has("alone-kept"))
	}
	// Many at once, some failing: batched, each failing one undone alone.
	var wg sync.WaitGroup
	errs := make([]error, 40)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = put("batched-"+string(rune('A'+i)), i%3 == 0)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		key := "batched-" + string(rune('A'+i))
		if fail := i%3 == 0; fail != errors.Is(err, boom) || has(key) == fail {
			t.Errorf("%s (failing %v): err %v, kept %v", key, fail, err, has(key))
		}
	}
}
