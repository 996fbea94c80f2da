package metrics_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/mcptask/mcptask/engine"
	"github.com/mcptask/mcptask/metrics"
	"github.com/mcptask/mcptask/store/sqlite"
	"github.com/mcptask/mcptask/task"
)

// A library user registers the metrics on a registry of their own, hands
// them to the engine as its observer, and serves the registry.
func Example() {
	dir, _ := os.MkdirTemp("", "metrics-example")
	defer os.RemoveAll(dir)
	st, err := sqlite.Open(filepath.Join(dir, "tasks.db"), nil)
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()

	reg := prometheus.NewRegistry()
	m := metrics.New(reg)
	if err := m.CollectStore(st, time.Second, nil); err != nil {
		log.Fatal(err)
	}
	eng, err := engine.New(engine.Options{Store: st, Observer: m, SweepInterval: -1, Exclusive: true})
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	if err := eng.Run(ctx); err != nil {
		log.Fatal(err)
	}
	defer eng.Shutdown(ctx)

	release := make(chan struct{})
	owner := task.UserOwner("acme", "alice")
	eng.Start(ctx, engine.StartSpec{Owner: owner, Tool: "report", Request: json.RawMessage(`{}`)},
		func(context.Context) (json.RawMessage, error) { <-release; return json.RawMessage(`{}`), nil })

	hs := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer hs.Close()
	resp, err := hs.Client().Get(hs.URL)
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		log.Fatal(err)
	}
	for _, line := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(line, "mcptask_tasks_created_total") || strings.HasPrefix(line, "mcptask_tasks{") {
			fmt.Println(line)
		}
	}
	close(release)
	// Output:
	// mcptask_tasks{status="working",tool="report"} 1
	// mcptask_tasks_created_total{tool="report"} 1
}
