package dashboard_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mcptask/mcptask/dashboard"
	"github.com/mcptask/mcptask/engine"
	"github.com/mcptask/mcptask/internal/testkit/pgtest"
	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/store/postgres"
	"github.com/mcptask/mcptask/store/sqlite"
	"github.com/mcptask/mcptask/store/storetest"
	"github.com/mcptask/mcptask/task"
)

// BenchmarkListPage100k measures the dashboard's server time for a list
// page on a store holding 100,000 tasks (storetest.BrowseTasks: 1,000
// owners, 20 tools, 90% completed): the first page with its counts, a
// tool's page, a status's page, and a page 1,000 pages deep. The figures
// of bench/README.md#dashboard come from it.
func BenchmarkListPage100k(b *testing.B) {
	b.Run("sqlite", func(b *testing.B) {
		st, err := sqlite.Open(filepath.Join(b.TempDir(), "tasks.db"), &sqlite.Options{Synchronous: sqlite.SyncNormal})
		if err != nil {
			b.Fatal(err)
		}
		defer st.Close()
		benchListPages(b, st)
	})
	b.Run("postgres", func(b *testing.B) {
		dsn := pgtest.DSN(b)
		st, err := postgres.Open(context.Background(), dsn, &postgres.Options{Schema: pgtest.Schema(b, dsn, "dashbench")})
		if err != nil {
			b.Fatal(err)
		}
		defer st.Close()
		benchListPages(b, st)
	})
}

// BenchmarkListPage1M is BenchmarkListPage100k on a store holding
// 1,000,000 tasks, loaded in bulk (the stores' LoadTasks, 10,000 per
// transaction: about a minute on SQLite); issue 33's goal is under 100
// ms of server time for the first page with its counts. It runs only
// with MCPTASK_BENCH_1M=1 (the load is long).
func BenchmarkListPage1M(b *testing.B) {
	if os.Getenv("MCPTASK_BENCH_1M") == "" {
		b.Skip("MCPTASK_BENCH_1M=1 runs it (the load takes minutes)")
	}
	type loader interface {
		LoadTasks(context.Context, []*task.Task) error
	}
	load := func(b *testing.B, st loader) {
		start := time.Now()
		for from := 0; from < 1_000_000; from += 10_000 {
			if err := st.LoadTasks(context.Background(), storetest.BrowseTasksFrom(from, 10_000)); err != nil {
				b.Fatal(err)
			}
		}
		b.Logf("1,000,000 tasks loaded in %v", time.Since(start).Round(time.Second))
	}
	b.Run("sqlite", func(b *testing.B) {
		st, err := sqlite.Open(filepath.Join(b.TempDir(), "tasks.db"), &sqlite.Options{Synchronous: sqlite.SyncNormal})
		if err != nil {
			b.Fatal(err)
		}
		defer st.Close()
		load(b, st)
		benchPages(b, st)
	})
	b.Run("postgres", func(b *testing.B) {
		dsn := pgtest.DSN(b)
		st, err := postgres.Open(context.Background(), dsn, &postgres.Options{Schema: pgtest.Schema(b, dsn, "dashbench1m")})
		if err != nil {
			b.Fatal(err)
		}
		defer st.Close()
		load(b, st)
		if err := st.Analyze(context.Background()); err != nil {
			b.Fatal(err)
		}
		benchPages(b, st)
	})
}

// benchListPages loads 100,000 tasks into st (creations from 8
// goroutines, through the store's own Create) and measures list pages.
func benchListPages(b *testing.B, st store.Store) {
	tasks := storetest.BrowseTasks(100_000)
	var wg sync.WaitGroup
	ch := make(chan int)
	var mu sync.Mutex
	var loadErr error
	for range 8 {
		wg.Go(func() {
			for i := range ch {
				if err := st.Create(context.Background(), tasks[i], store.CreateOptions{}); err != nil {
					mu.Lock()
					loadErr = err
					mu.Unlock()
				}
			}
		})
	}
	for i := range tasks {
		ch <- i
	}
	close(ch)
	wg.Wait()
	if loadErr != nil {
		b.Fatal(loadErr)
	}
	benchPages(b, st)
}

// benchPages measures the list pages of a dashboard on st.
func benchPages(b *testing.B, st store.Store) {
	eng, err := engine.New(engine.Options{Store: st, SweepInterval: -1, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	// A clock two seconds further at each reading: no page reuses the
	// counts of another (as after any change in a busy store).
	var tick atomic.Int64
	start := time.Now()
	clock := func() time.Time { return start.Add(time.Duration(tick.Add(1)) * 2 * time.Second) }
	d, err := dashboard.New(dashboard.Options{Engine: eng, Store: st, Now: clock})
	if err != nil {
		b.Fatal(err)
	}
	get := func(b *testing.B, path string) string {
		rec := httptest.NewRecorder()
		d.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		if rec.Code != http.StatusOK {
			b.Fatalf("%s: %d %s", path, rec.Code, rec.Body.String())
		}
		return rec.Body.String()
	}
	next := regexp.MustCompile(`href="\?([^"]*cursor=[^"]+)" id="next-page"`)
	deep := "/"
	for range 1000 {
		m := next.FindStringSubmatch(get(b, deep))
		if m == nil {
			b.Fatal("no next page")
		}
		deep = "/?" + strings.ReplaceAll(m[1], "&amp;", "&")
	}
	for _, c := range []struct{ name, path string }{
		{"first", "/"},
		{"tool", "/?tool=tool-3"},
		{"status=failed", "/?status=failed"},
		{"page1000", deep},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				get(b, c.path)
			}
		})
	}
}
