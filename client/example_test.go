package client_test

import (
	"context"
	"fmt"
	"log"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"time"

	"github.com/mcptask/mcptask"
	"github.com/mcptask/mcptask/client"
	"github.com/mcptask/mcptask/demo"
	"github.com/mcptask/mcptask/engine"
	"github.com/mcptask/mcptask/store/sqlite"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Example calls a long tool as a task, waits for it with a journal (so
// that a crashed host could reattach with Resume), and answers the
// confirmation a deployment asks for.
func Example() {
	dir, err := os.MkdirTemp("", "mcptask-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	url, stop := exampleServer(filepath.Join(dir, "tasks.db"))
	defer stop()

	ctx := context.Background()
	c, err := client.Dial(ctx, url, &client.Options{
		Journal: filepath.Join(dir, "journal.json"),
		Elicit: func(ctx context.Context, taskID string, p *mcp.ElicitParams) (*mcp.ElicitResult, error) {
			// A real host asks its user p.Message.
			return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"confirm": true}}, nil
		},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	fmt.Println("wire:", c.Wire(), "tasks:", c.TasksSupported())

	for _, call := range []struct {
		tool string
		args map[string]any
	}{
		{"long_computation", map[string]any{"n": 1000, "steps": 2, "step_delay_ms": 10}},
		{"deploy_with_confirmation", map[string]any{"service": "api", "version": "2.0", "build_steps": 1, "step_delay_ms": 0}},
	} {
		res, err := c.CallTool(ctx, call.tool, call.args)
		if err != nil {
			log.Fatal(err)
		}
		if res.Task == nil { // the server answered at once
			fmt.Println(res.Result.Content[0].(*mcp.TextContent).Text)
			continue
		}
		out, err := c.Wait(ctx, res.Task.ID, &client.WaitOptions{Deadline: time.Minute})
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(out.Content[0].(*mcp.TextContent).Text)
	}
	pending, _ := c.Pending()
	fmt.Println("tasks in flight:", len(pending))

	// Output:
	// wire: 2026-07-28 tasks: true
	// There are 168 primes up to 1000 (computed in 2 steps).
	// Deployed api@2.0 to production.
	// tasks in flight: 0
}

// ExampleReadJournal lists the tasks in flight that a journal records, of
// every server, without connecting to any: what a host reads at start to
// know which servers it has tasks to resume on.
func ExampleReadJournal() {
	dir, err := os.MkdirTemp("", "mcptask-example-")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	url, stop := exampleServer(filepath.Join(dir, "tasks.db"))
	defer stop()
	journal := filepath.Join(dir, "journal.json")

	// A host starts a task, and stops before waiting for it.
	ctx := context.Background()
	c, err := client.Dial(ctx, url, &client.Options{Journal: journal})
	if err != nil {
		log.Fatal(err)
	}
	call, err := c.CallTool(ctx, "long_computation", map[string]any{"n": 1000, "steps": 1, "step_delay_ms": 0})
	if err != nil {
		log.Fatal(err)
	}
	c.Close()

	entries, err := client.ReadJournal(journal)
	if err != nil {
		log.Fatal(err)
	}
	for _, e := range entries {
		fmt.Println(e.Tool, e.Wire, e.TaskID == call.Task.ID, e.Target == url)
	}

	// Output:
	// long_computation 2026-07-28 true true
}

// exampleServer serves the demo tools with tasks on loopback HTTP, as
// mcptaskd does.
func exampleServer(db string) (url string, stop func()) {
	st, err := sqlite.Open(db, nil)
	if err != nil {
		log.Fatal(err)
	}
	logger := slog.New(slog.DiscardHandler)
	eng, err := engine.New(engine.Options{Store: st, Logger: logger})
	if err != nil {
		log.Fatal(err)
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "example", Version: "1"}, &mcp.ServerOptions{Logger: logger})
	ts, err := mcptask.New(srv, eng, &mcptask.Options{Logger: logger})
	if err != nil {
		log.Fatal(err)
	}
	demo.Register(ts)
	if err := eng.Run(context.Background()); err != nil {
		log.Fatal(err)
	}
	hs := httptest.NewServer(ts.Handler(nil))
	return hs.URL + "/mcp", func() {
		hs.Close()
		eng.Shutdown(context.Background())
		st.Close()
	}
}
