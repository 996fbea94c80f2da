package dashboard

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcptask/mcptask/engine"
	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/store/sqlite"
	"github.com/mcptask/mcptask/store/storetest"
)

// TestCountsStopAtTheLimit: the store's counts stop at a limit (10,000 by
// default, so that the list costs the same at a million tasks); a count
// that reached it is shown "N+", the total and the page's range too.
func TestCountsStopAtTheLimit(t *testing.T) {
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "tasks.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, tk := range storetest.BrowseTasks(5) { // completed, all
		if err := st.Create(context.Background(), tk, store.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	eng, err := engine.New(engine.Options{Store: st, SweepInterval: -1, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	h, err := New(Options{Engine: eng, Store: st})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	page := func() string {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
		if rec.Code != http.StatusOK {
			t.Fatalf("list: %d %s", rec.Code, rec.Body)
		}
		return rec.Body.String()
	}
	if body := page(); !strings.Contains(body, "All <strong>5</strong>") || strings.Contains(body, "5+") {
		t.Fatalf("the counts under the limit are not exact:\n%s", body)
	}
	h.countLimit = 2
	h.countCache = countCache{}
	body := page()
	for _, want := range []string{"All <strong>2&#43;</strong>", `data-status="completed">completed <strong>2&#43;</strong>`, "1–5 of 5&#43;"} {
		if !strings.Contains(body, want) {
			t.Errorf("no %q in the list:\n%s", want, body)
		}
	}
}
