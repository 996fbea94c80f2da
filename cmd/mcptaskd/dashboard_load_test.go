package main

import (
	"context"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/store/sqlite"
	"github.com/mcptask/mcptask/task"
)

// TestDashboardLoad100k measures, in headless Chromium, how long the
// dashboard's task list takes to load over a SQLite store of 100,000
// tasks: the first page, a filtered page and the page 1,000 pages deep
// (Navigation Timing, the median of 5 loads each). It takes a few
// minutes, so it runs only with MCPTASK_DASHBOARD_100K=1; run it without
// -race for figures that mean something:
//
//	MCPTASK_DASHBOARD_100K=1 go test -run TestDashboardLoad100k -v ./cmd/mcptaskd/
func TestDashboardLoad100k(t *testing.T) {
	if os.Getenv("MCPTASK_DASHBOARD_100K") != "1" {
		t.Skip("set MCPTASK_DASHBOARD_100K=1 to measure the dashboard's list over 100,000 tasks (a few minutes)")
	}
	const total = 100_000
	db := filepath.Join(t.TempDir(), "tasks.db")
	fillStore(t, db, total)

	d := startDaemon(t, "mcptaskd", db, "-sweep-interval", "1h")
	b := newBrowser(t)
	list := d.Base + "/dashboard/"

	// The page 1,000 pages deep: follow the next links, server-side.
	deep := list
	nextRE := regexp.MustCompile(`<a href="([^"]*)" id="next-page">`)
	start := time.Now()
	for range 1000 {
		res, err := http.Get(deep)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(res.Body)
		res.Body.Close()
		if err != nil || res.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d %v", deep, res.StatusCode, err)
		}
		m := nextRE.FindSubmatch(body)
		if m == nil {
			t.Fatalf("no next page after %s", deep)
		}
		deep = list + html.UnescapeString(string(m[1]))
	}
	t.Logf("followed 1,000 next links in %v (%v a page, server-side, without the browser)",
		time.Since(start).Round(time.Millisecond), (time.Since(start) / 1000).Round(time.Microsecond))

	for _, p := range []struct{ name, url string }{
		{"first page", list},
		{"filtered (status=failed, tool=lint_report)", list + "?status=failed&tool=lint_report"},
		{"1,000 pages deep", deep},
		{"task page", ""},
	} {
		if p.url == "" {
			// A task of the first page.
			b.navigate(list)
			href := js[string](b, `document.querySelector("#rows td.id a").href`)
			p.url = href
		}
		var load, resp []time.Duration
		for range 5 {
			b.navigate(p.url)
			rows := js[int](b, `document.querySelectorAll("#rows tr[data-status], #task-status").length`)
			if rows == 0 {
				t.Fatalf("%s: the page shows no task", p.name)
			}
			timing := js[map[string]float64](b, `(() => { const n = performance.getEntriesByType("navigation")[0];
				return {load: n.loadEventEnd - n.startTime, resp: n.responseEnd - n.requestStart}; })()`)
			ms := func(v float64) time.Duration {
				return time.Duration(v * float64(time.Millisecond)).Round(100 * time.Microsecond)
			}
			load = append(load, ms(timing["load"]))
			resp = append(resp, ms(timing["resp"]))
		}
		t.Logf("%-45s load (loadEventEnd-startTime) median %v [%v]; response (responseEnd-requestStart) median %v [%v]",
			p.name, median(load), load, median(resp), resp)
	}
	b.noProblems()
}

// fillStore creates n finished tasks in the SQLite store db, created over
// the last hour by a few owners and tools, in parallel so that the
// store's writer commits them in groups.
func fillStore(t *testing.T, db string, n int) {
	t.Helper()
	start := time.Now()
	st, err := sqlite.Open(db, &sqlite.Options{Logger: slog.New(slog.DiscardHandler), Synchronous: sqlite.Sync("normal")})
	if err != nil {
		t.Fatal(err)
	}
	policy := task.Policy{DefaultTTL: 24 * time.Hour, MaxTTL: 24 * time.Hour}
	tools := []string{"long_computation", "lint_report", "deploy_with_confirmation", "flaky_migration", "echo"}
	owners := []task.Owner{task.UserOwner("acme", "alice"), task.UserOwner("acme", "bob"), task.UserOwner("globex", "carol")}
	now := time.Now().Add(-time.Hour)
	const workers = 32
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			for i := w; i < n; i += workers {
				created := now.Add(time.Duration(i) * time.Hour / time.Duration(n))
				tk := task.New(policy, owners[i%len(owners)], tools[i%len(tools)], nil, created)
				tk.Wire = "2026-07-28"
				tk.Request = json.RawMessage(`{"name":"` + tk.Tool + `","arguments":{}}`)
				tk.LastUpdatedAt = created.Add(time.Second)
				switch (i / len(tools)) % 10 { // every status with every tool
				case 0:
					tk.Status, tk.StatusMessage = task.Failed, "lock timeout at step 2"
					tk.Error = &task.Error{Code: task.CodeInternalError, Message: "lock timeout"}
				case 1:
					tk.Status, tk.StatusMessage = task.Cancelled, "cancelled by the requester"
				default:
					tk.Status, tk.StatusMessage = task.Completed, fmt.Sprintf("step %d of %d", i%7+1, i%7+1)
					tk.Result = json.RawMessage(`{"content":[{"type":"text","text":"done"}]}`)
				}
				if err := st.Create(context.Background(), tk, store.CreateOptions{}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	var size int64
	filepath.WalkDir(filepath.Dir(db), func(_ string, e fs.DirEntry, _ error) error {
		if info, err := e.Info(); err == nil && !info.IsDir() {
			size += info.Size()
		}
		return nil
	})
	t.Logf("created %d tasks in %v (%d MB on disk)", n, time.Since(start).Round(time.Millisecond), size>>20)
}
