package mcptask_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"

	"github.com/mcptask/mcptask"
	"github.com/mcptask/mcptask/audit"
	"github.com/mcptask/mcptask/engine"
	"github.com/mcptask/mcptask/internal/testkit/wiretest"
	"github.com/mcptask/mcptask/store/sqlite"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Cap each requester's unfinished tasks and keep an audit trail: a second
// task while the first still runs is refused with CodeLimitExceeded; the
// trail records the creation, the refusal and the cancellation.
func ExampleLimits() {
	dir, _ := os.MkdirTemp("", "mcptask-example")
	defer os.RemoveAll(dir)
	st, err := sqlite.Open(filepath.Join(dir, "tasks.db"), nil)
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	// Audit records on standard output, without their time, so that the
	// example's output is stable.
	trail := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey || a.Key == "task" || a.Key == "ttl" {
			return slog.Attr{}
		}
		return a
	}}))
	eng, _ := engine.New(engine.Options{Store: st, Logger: discard, Audit: audit.New(trail)})
	srv := mcp.NewServer(&mcp.Implementation{Name: "example", Version: "1"}, &mcp.ServerOptions{Logger: discard})
	limits := mcptask.DefaultLimits
	limits.MaxActiveTasks = 1
	ts, _ := mcptask.New(srv, eng, &mcptask.Options{Logger: discard, Limits: limits})

	mcptask.AddTool(ts, &mcp.Tool{Name: "build", Description: "Builds until cancelled."},
		func(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			<-ctx.Done()
			return nil, nil, ctx.Err()
		}, mcptask.ToolOptions{Support: mcptask.Optional})
	if err := eng.Run(context.Background()); err != nil {
		log.Fatal(err)
	}
	defer eng.Shutdown(context.Background())
	hs := httptest.NewServer(ts.Handler(nil))
	defer hs.Close()

	c := &wiretest.Client{URL: hs.URL, Tasks: true}
	ctx := context.Background()
	first, _ := c.CallTool(ctx, "build", nil)
	_, err = c.CallTool(ctx, "build", nil)
	var rpcErr *wiretest.Error
	if errors.As(err, &rpcErr) {
		var data struct{ Reason string }
		_ = json.Unmarshal(rpcErr.Data, &data)
		fmt.Println("second call:", rpcErr.Code == mcptask.CodeLimitExceeded, data.Reason)
	}
	if err := c.Result(ctx, "tasks/cancel", map[string]any{"taskId": first.TaskID}, nil); err != nil {
		log.Fatal(err)
	}
	// Output:
	// level=INFO msg=audit event=task.created tool=build principal=anonymous tenant="" wire=2026-07-28
	// level=INFO msg=audit event=request.limited method=tools/call limit=active_tasks principal=anonymous tenant="" tool=build refused=1
	// second call: true too_many_active_tasks
	// level=INFO msg=audit event=task.status_changed tool=build principal=anonymous tenant="" from=working to=cancelled
	// level=INFO msg=audit event=task.cancelled tool=build principal=anonymous tenant="" owner_principal=anonymous owner_tenant=""
}
