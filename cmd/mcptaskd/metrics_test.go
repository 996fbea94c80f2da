package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/mcptask/mcptask/internal/testkit/wiretest"
	"github.com/mcptask/mcptask/store"
)

// scrape GETs url with the bearer token (none if empty) and returns the
// HTTP status and the parsed metric families (nil unless 200).
func scrape(t *testing.T, url, token string) (int, map[string]*dto.MetricFamily) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, nil
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parsing %s: %v", url, err)
	}
	return resp.StatusCode, fams
}

// metricValue returns the value of the sample of family name whose
// labels are labels ("k=v" pairs): a counter's or gauge's value, a
// histogram's sample count; 0 when there is none.
func metricValue(fams map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	f := fams[name]
	if f == nil {
		return 0
	}
	for _, m := range f.GetMetric() {
		var have []string
		for _, lp := range m.GetLabel() {
			have = append(have, lp.GetName()+"="+lp.GetValue())
		}
		slices.Sort(have)
		want := slices.Sorted(slices.Values(labels))
		if !slices.Equal(have, want) {
			continue
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue()
		case m.Gauge != nil:
			return m.Gauge.GetValue()
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount())
		}
	}
	return 0
}

// TestMetricsScrape runs tasks of every fate through an in-process
// mcptaskd with authentication (real HTTP on loopback, a real SQLite
// file), then scrapes /metrics: only the admin may; the counters count
// what happened, the gauges of unfinished tasks equal the store's counts,
// and no label carries a task ID, a principal or a tenant.
func TestMetricsScrape(t *testing.T) {
	t.Parallel()
	const adminTok, aliceTok, bobTok = "admin-token-0123456789abcdef", "alice-token-0123456789abcdef", "bob-token-0123456789abcdefgh"
	tokens := writeTokens(t,
		map[string]any{"token": adminTok, "principal": "root", "tenant": "ops", "scopes": []string{"mcptask:admin"}},
		map[string]any{"token": aliceTok, "principal": "alice", "tenant": "acme", "scopes": []string{"tasks"}},
		map[string]any{"token": bobTok, "principal": "bob", "tenant": "acme", "scopes": []string{"tasks"}})
	cfg, err := parseConfig([]string{"-db", filepath.Join(t.TempDir(), "tasks.db"), "-tokens", tokens,
		"-max-active-tasks", "2", "-create-rate", "0", "-request-rate", "0", "-poll-interval", "1m", "-max-poll-interval", "10m"},
		func(string) string { return "" }, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.DiscardHandler)
	app, err := NewApp(cfg, logger, logger)
	if err != nil {
		t.Fatal(err)
	}
	if err := app.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		now, stop := context.WithCancel(context.Background())
		stop()
		app.Close(now)
	})
	hs := httptest.NewServer(app.Handler())
	t.Cleanup(hs.Close)
	alice := &wiretest.Client{URL: hs.URL + "/mcp", Tasks: true, Header: http.Header{"Authorization": {"Bearer " + aliceTok}}}
	bob := &wiretest.Client{URL: hs.URL + "/mcp", Tasks: true, Header: http.Header{"Authorization": {"Bearer " + bobTok}}}
	ctx := t.Context()

	gets := map[string]int{} // tasks/get answers by outcome
	var ids []string
	start := func(tool string, args map[string]any) string {
		t.Helper()
		tk, err := alice.CallTool(ctx, tool, args)
		if err != nil || tk.TaskID == "" {
			t.Fatalf("%s: %+v %v", tool, tk, err)
		}
		ids = append(ids, tk.TaskID)
		return tk.TaskID
	}
	waitStatus := func(id string, statuses ...string) {
		t.Helper()
		waitUntil(t, 30*time.Second, "task "+id+" "+strings.Join(statuses, "|"), func() (bool, error) {
			tk, err := alice.Get(ctx, id)
			if err != nil {
				gets["error"]++
				return false, err
			}
			gets["ok"]++
			return slices.Contains(statuses, tk.Status), nil
		})
	}
	quick := map[string]any{"n": 50, "steps": 1, "step_delay_ms": 0}
	long := map[string]any{"n": 1000, "steps": 5, "step_delay_ms": 60000}
	for range 2 {
		waitStatus(start("long_computation", quick), "completed")
	}
	waitStatus(start("flaky_migration", map[string]any{"steps": 3, "fail_at_step": 1}), "failed")
	cancelled := start("long_computation", long)
	if err := alice.Result(ctx, "tasks/cancel", map[string]any{"taskId": cancelled}, nil); err != nil {
		t.Fatal(err)
	}
	waitStatus(cancelled, "cancelled")
	waitStatus(start("deploy_with_confirmation", map[string]any{"service": "api", "version": "1.2.3", "build_steps": 1, "step_delay_ms": 0}), "input_required")
	running := start("long_computation", long)
	waitStatus(running, "working")
	// A third unfinished task is refused: -max-active-tasks 2.
	if tk, err := alice.CallTool(ctx, "long_computation", quick); err == nil {
		t.Fatalf("a third unfinished task was created: %+v", tk)
	}
	// Polling a task again at once (well within the minute suggested)
	// gets a raised poll interval.
	for range 2 {
		if _, err := alice.Get(ctx, running); err != nil {
			t.Fatal(err)
		}
		gets["ok"]++
	}
	// The admin drains lint_report: a call is refused.
	wantAdmin(t, "PUT drain", adminDo(t, hs.URL, http.MethodPut, adminTok, map[string]any{"tools": []string{"lint_report"}}, nil), http.StatusOK)
	if !drainRefused(t, alice, "lint_report", map[string]any{"source": "x"}) {
		t.Fatal("lint_report served while drained")
	}
	// Bob asks for alice's task, and for one that never existed.
	if _, err := bob.Get(ctx, running); err == nil {
		t.Fatal("bob read alice's task")
	}
	if _, err := bob.Get(ctx, "no-such-task"); err == nil {
		t.Fatal("bob read an unknown task")
	}

	url := hs.URL + metricsPath
	if code, _ := scrape(t, url, ""); code != http.StatusUnauthorized {
		t.Fatalf("/metrics without a token: %d, want 401", code)
	}
	if code, _ := scrape(t, url, aliceTok); code != http.StatusForbidden {
		t.Fatalf("/metrics with a token without the admin scope: %d, want 403", code)
	}
	// The status changes are counted just after they are stored: wait
	// for the last of them.
	var fams map[string]*dto.MetricFamily
	waitUntil(t, 30*time.Second, "the finished tasks counted", func() (bool, error) {
		code, f := scrape(t, url, adminTok)
		if code != http.StatusOK {
			return false, fmt.Errorf("/metrics by the admin: %d", code)
		}
		fams = f
		return metricValue(f, "mcptask_tasks_finished_total", "tool=long_computation", "status=cancelled", "outcome=cancelled") == 1 &&
			metricValue(f, "mcptask_tasks_finished_total", "tool=long_computation", "status=completed", "outcome=ok") == 2 &&
			metricValue(f, "mcptask_tasks_finished_total", "tool=flaky_migration", "status=failed", "outcome=failed") == 1, nil
	})

	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"mcptask_tasks_created_total", []string{"tool=long_computation"}, 4},
		{"mcptask_tasks_created_total", []string{"tool=flaky_migration"}, 1},
		{"mcptask_tasks_created_total", []string{"tool=deploy_with_confirmation"}, 1},
		{"mcptask_task_duration_seconds", []string{"tool=long_computation", "status=completed", "outcome=ok"}, 2},
		{"mcptask_task_duration_seconds", []string{"tool=flaky_migration", "status=failed", "outcome=failed"}, 1},
		{"mcptask_task_duration_seconds", []string{"tool=long_computation", "status=cancelled", "outcome=cancelled"}, 1},
		{"mcptask_tasks_refused_total", []string{"tool=long_computation", "reason=active_tasks"}, 1},
		{"mcptask_tasks_refused_total", []string{"tool=lint_report", "reason=draining"}, 1},
		{"mcptask_limit_refusals_total", []string{"limit=active_tasks"}, 1},
		{"mcptask_denied_lookups_total", []string{"reason=other_owner"}, 1},
		{"mcptask_denied_lookups_total", []string{"reason=unknown"}, 1},
		{"mcptask_requests_total", []string{"method=tasks/get", "outcome=ok"}, float64(gets["ok"])},
		{"mcptask_requests_total", []string{"method=tasks/get", "outcome=error"}, float64(gets["error"] + 2)},
		{"mcptask_requests_total", []string{"method=tasks/cancel", "outcome=ok"}, 1},
		{"mcptask_tasks", []string{"tool=long_computation", "status=working"}, 1},
		{"mcptask_tasks", []string{"tool=deploy_with_confirmation", "status=input_required"}, 1},
	} {
		if got := metricValue(fams, c.name, c.labels...); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	if got := metricValue(fams, "mcptask_poll_interval_raised_total"); got < 1 {
		t.Errorf("mcptask_poll_interval_raised_total = %v after polling a task twice at once, want at least 1", got)
	}
	// The gauges are the store's counts.
	counts, err := app.store.(store.Counter).CountActive(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var inStore float64
	for _, n := range counts {
		inStore += float64(n.N)
		if got := metricValue(fams, "mcptask_tasks", "tool="+n.Tool, "status="+string(n.Status)); got != float64(n.N) {
			t.Errorf("mcptask_tasks{tool=%s,status=%s} = %v, the store counts %d", n.Tool, n.Status, got, n.N)
		}
	}
	var gauged float64
	for _, m := range fams["mcptask_tasks"].GetMetric() {
		gauged += m.GetGauge().GetValue()
	}
	if inStore != 2 || gauged != inStore {
		t.Errorf("unfinished tasks: %v in the gauges, %v in the store, want 2", gauged, inStore)
	}
	// No label value is a task ID, a principal, a tenant or a token.
	secret := append([]string{"alice", "bob", "root", "acme", "ops", adminTok, aliceTok, bobTok, "no-such-task"}, ids...)
	for name, f := range fams {
		for _, m := range f.GetMetric() {
			for _, lp := range m.GetLabel() {
				for _, s := range secret {
					if strings.Contains(lp.GetValue(), s) {
						t.Errorf("%s has label %s=%q, which names %q", name, lp.GetName(), lp.GetValue(), s)
					}
				}
			}
		}
	}
}

// TestMetricsAddr: a real mcptaskd with -metrics-addr serves /metrics on
// that listener, without authentication, and not on -addr.
func TestMetricsAddr(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, "metrics-addr", filepath.Join(t.TempDir(), "tasks.db"), "-metrics-addr", "127.0.0.1:0")
	var url string
	waitUntil(t, 30*time.Second, "the metrics listener logged", func() (bool, error) {
		for _, rec := range d.LogRecords("serving metrics on a listener of their own, without authentication") {
			url, _ = rec["url"].(string)
		}
		return url != "", nil
	})
	c := d.client(true)
	id := startTask(t, c, "long_computation", map[string]any{"n": 50, "steps": 1, "step_delay_ms": 0})
	waitTask(t, c, id, 30*time.Second, "completed", terminal)
	waitUntil(t, 30*time.Second, "the task counted on -metrics-addr", func() (bool, error) {
		code, fams := scrape(t, url, "")
		if code != http.StatusOK {
			return false, fmt.Errorf("GET %s: %d", url, code)
		}
		return metricValue(fams, "mcptask_tasks_created_total", "tool=long_computation") == 1 &&
			metricValue(fams, "mcptask_tasks_finished_total", "tool=long_computation", "status=completed", "outcome=ok") == 1, nil
	})
	if code, _ := scrape(t, d.Base+metricsPath, ""); code != http.StatusNotFound {
		t.Fatalf("/metrics on -addr with -metrics-addr: %d, want 404", code)
	}
}

// TestMetricsUpstream: with a gateway upstream (a stdio server), /metrics
// on a loopback listener without authentication reports it up, and a
// task of its tool counts as created and finished.
func TestMetricsUpstream(t *testing.T) {
	t.Parallel()
	config, _ := gatewayConfig(t, false)
	base := serveApp(t, nil, "-db", filepath.Join(t.TempDir(), "tasks.db"), "-config", config)
	c := &wiretest.Client{URL: base + "/mcp", Tasks: true}
	id := startTask(t, c, "build", map[string]any{"steps": 1})
	waitTask(t, c, id, 60*time.Second, "completed", terminal)
	waitUntil(t, 30*time.Second, "the upstream's task counted", func() (bool, error) {
		code, fams := scrape(t, base+metricsPath, "")
		if code != http.StatusOK {
			return false, fmt.Errorf("/metrics on loopback without authentication: %d", code)
		}
		if got := metricValue(fams, "mcptask_upstream_up", "upstream=builder"); got != 1 {
			return false, fmt.Errorf("mcptask_upstream_up{upstream=builder} = %v, want 1", got)
		}
		return metricValue(fams, "mcptask_tasks_created_total", "tool=build") == 1 &&
			metricValue(fams, "mcptask_tasks_finished_total", "tool=build", "status=completed", "outcome=ok") == 1, nil
	})
}

// TestMetricsTwoInstancesPostgres: two mcptaskd apps sharing one
// PostgreSQL schema each count the tasks they created, and both report
// the unfinished tasks of the shared store, whichever instance runs them.
func TestMetricsTwoInstancesPostgres(t *testing.T) {
	t.Parallel()
	dsn := pgDSN(t)
	schema := pgSchema(t, dsn)
	args := []string{"-postgres", dsn, "-postgres-schema", schema, "-max-active-tasks", "0", "-create-rate", "0", "-request-rate", "0"}
	a, b := serveApp(t, nil, args...), serveApp(t, nil, args...)
	ca := &wiretest.Client{URL: a + "/mcp", Tasks: true}
	cb := &wiretest.Client{URL: b + "/mcp", Tasks: true}
	long := startTask(t, ca, "long_computation", map[string]any{"n": 1000, "steps": 5, "step_delay_ms": 60000})
	waitTask(t, ca, long, 30*time.Second, "working", func(tk *wiretest.Task) bool { return tk.Status == "working" })
	deploy := startTask(t, cb, "deploy_with_confirmation", map[string]any{"service": "api", "version": "1", "build_steps": 1, "step_delay_ms": 0})
	waitTask(t, cb, deploy, 30*time.Second, "input_required", func(tk *wiretest.Task) bool { return tk.Status == "input_required" })
	for _, inst := range []struct {
		base    string
		created string // the tool of the one task this instance created
	}{{a, "long_computation"}, {b, "deploy_with_confirmation"}} {
		code, fams := scrape(t, inst.base+metricsPath, "")
		if code != http.StatusOK {
			t.Fatalf("%s: /metrics %d", inst.base, code)
		}
		if got := metricValue(fams, "mcptask_tasks", "tool=long_computation", "status=working"); got != 1 {
			t.Errorf("%s: working long_computation tasks %v, want 1 (the store's)", inst.base, got)
		}
		if got := metricValue(fams, "mcptask_tasks", "tool=deploy_with_confirmation", "status=input_required"); got != 1 {
			t.Errorf("%s: input_required deploy tasks %v, want 1 (the store's)", inst.base, got)
		}
		var created float64
		for _, m := range fams["mcptask_tasks_created_total"].GetMetric() {
			created += m.GetCounter().GetValue()
		}
		if created != 1 || metricValue(fams, "mcptask_tasks_created_total", "tool="+inst.created) != 1 {
			t.Errorf("%s: created %v tasks, want 1 of %s", inst.base, created, inst.created)
		}
	}
}

// TestMetricsOff: with -metrics=false there is no /metrics.
func TestMetricsOff(t *testing.T) {
	t.Parallel()
	base := serveApp(t, nil, "-db", filepath.Join(t.TempDir(), "tasks.db"), "-metrics=false")
	if code, _ := scrape(t, base+metricsPath, ""); code != http.StatusNotFound {
		t.Fatalf("/metrics with -metrics=false: %d, want 404", code)
	}
}

// TestMetricsRequestRate: a tasks/* request refused by the request rate
// counts as outcome "limited" and as a request_rate limit refusal.
func TestMetricsRequestRate(t *testing.T) {
	t.Parallel()
	base := serveApp(t, nil, "-db", filepath.Join(t.TempDir(), "tasks.db"), "-request-rate", "0.001", "-request-burst", "1")
	c := &wiretest.Client{URL: base + "/mcp", Tasks: true}
	for range 2 {
		if _, err := c.Get(t.Context(), "no-such-task"); err == nil {
			t.Fatal("tasks/get of an unknown task succeeded")
		}
	}
	code, fams := scrape(t, base+metricsPath, "")
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d", code)
	}
	for _, c := range []struct {
		name   string
		labels []string
	}{
		{"mcptask_requests_total", []string{"method=tasks/get", "outcome=error"}},
		{"mcptask_requests_total", []string{"method=tasks/get", "outcome=limited"}},
		{"mcptask_limit_refusals_total", []string{"limit=request_rate"}},
		{"mcptask_denied_lookups_total", []string{"reason=unknown"}},
	} {
		if got := metricValue(fams, c.name, c.labels...); got != 1 {
			t.Errorf("%s%v = %v, want 1", c.name, c.labels, got)
		}
	}
}

// TestEndpointsNamed: at start-up mcptaskd names every endpoint it
// serves, in its log and on stdout (after the "listening on" line that
// scripts read), not /mcp alone.
func TestEndpointsNamed(t *testing.T) {
	t.Parallel()
	d := startDaemon(t, "endpoints", filepath.Join(t.TempDir(), "tasks.db"))
	var rec map[string]any
	waitUntil(t, 30*time.Second, "the endpoints logged", func() (bool, error) {
		if recs := d.LogRecords("endpoints"); len(recs) > 0 {
			rec = recs[0]
		}
		return rec != nil, nil
	})
	root := strings.TrimSuffix(d.URL, "/mcp")
	for key, want := range map[string]string{"mcp": "/mcp", "healthz": "/healthz", "admin": "/admin/drain", "dashboard": "/dashboard/", "metrics": "/metrics"} {
		if got, _ := rec[key].(string); got != root+want {
			t.Errorf("the endpoints record says %s=%q, want %q", key, got, root+want)
		}
	}
	lines := []string{"dashboard on " + root + "/dashboard/", "metrics on " + root + "/metrics", "health on " + root + "/healthz"}
	waitUntil(t, 30*time.Second, "the endpoints on stdout", func() (bool, error) {
		for _, line := range lines {
			if !strings.Contains(d.Stdout(), line) {
				return false, nil
			}
		}
		return true, nil
	})
}
