package dashboard_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/mcptask/mcptask"
	"github.com/mcptask/mcptask/dashboard"
	"github.com/mcptask/mcptask/engine"
	"github.com/mcptask/mcptask/store/sqlite"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestForServer: ForServer shows the server's tools and sets
// its drain switch.
func TestForServer(t *testing.T) {
	st, err := sqlite.Open(filepath.Join(t.TempDir(), "tasks.db"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	eng, err := engine.New(engine.Options{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := mcptask.New(mcp.NewServer(&mcp.Implementation{Name: "s", Version: "1"}, nil), eng, nil)
	if err != nil {
		t.Fatal(err)
	}
	type in struct{}
	for _, name := range []string{"build", "deploy"} {
		mcptask.AddTool(srv, &mcp.Tool{Name: name}, func(context.Context, *mcp.CallToolRequest, in) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{}, nil, nil
		}, mcptask.ToolOptions{Support: mcptask.Optional})
	}
	if err := srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer srv.Close(context.Background())
	dash, err := dashboard.ForServer(srv, st, dashboard.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer dash.Close()
	hs := httptest.NewServer(http.StripPrefix("/d", dash))
	defer hs.Close()
	resp, err := http.Get(hs.URL + "/d/tools")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	page := string(body)
	if !strings.Contains(page, `id="tool-build"`) || !strings.Contains(page, `id="tool-deploy"`) {
		t.Fatalf("the Tools page lacks the server's tools:\n%s", page)
	}
	tok := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(page)[1]
	req, _ := http.NewRequest(http.MethodPost, hs.URL+"/d/drain", strings.NewReader(url.Values{"csrf": {tok}, "tool": {"deploy"}, "drained": {"on"}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err = http.DefaultTransport.RoundTrip(req)
	if err != nil || resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("drain: %v %v", resp, err)
	}
	if d := srv.Draining(); d.All || !slices.Equal(d.Tools, []string{"deploy"}) {
		t.Fatalf("after the dashboard's drain: %+v", d)
	}
}
