package gateway_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mcptask/mcptask"
	"github.com/mcptask/mcptask/client"
	"github.com/mcptask/mcptask/internal/testkit/proctest"
	"github.com/mcptask/mcptask/internal/testkit/servertest"
	"github.com/mcptask/mcptask/source/gateway"
	"github.com/mcptask/mcptask/task"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// tenantsGateway is a gateway of up behind bearer tokens: the token
// "alice" is alice of tenant a, "bob" bob of tenant b. It returns the
// endpoint and the gateway's log.
func tenantsGateway(t *testing.T, up gateway.Upstream) (string, *proctest.Buffer) {
	t.Helper()
	logs := &proctest.Buffer{}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	verify := func(_ context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
		switch token {
		case "alice":
			return &auth.TokenInfo{UserID: task.UserID("a", "alice"), Expiration: time.Now().Add(time.Hour)}, nil
		case "bob":
			return &auth.TokenInfo{UserID: task.UserID("b", "bob"), Expiration: time.Now().Add(time.Hour)}, nil
		}
		return nil, auth.ErrInvalidToken
	}
	s := servertest.Start(t, servertest.Options{
		Logger:    log,
		StopGrace: 5 * time.Second,
		Wrap:      auth.RequireBearerToken(verify, nil),
		Register: func(ts *mcptask.Server) (func(), error) {
			gw := gateway.New([]gateway.Upstream{up}, log, nil)
			err := gw.Register(t.Context(), ts)
			if err != nil {
				return nil, err
			}
			return func() { _ = gw.Close() }, nil
		},
	})
	return s.URL + "/mcp", logs
}

// TestCrossTenantLateRequests is the attack of a hostile upstream on the
// pool of upstream sessions: its tool answers alice at once and later, on
// the same connection, sends a log message and an elicitation about
// alice's data. Meanwhile bob (another tenant) has a call in flight. Bob's
// task never sees alice's question or log line, the late elicitation is
// refused, and the gateway's log names the refusal without its payload.
// Over stdio and over HTTP, on both of our wires.
func TestCrossTenantLateRequests(t *testing.T) {
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return upstreamServer(false) }, nil))
	t.Cleanup(hs.Close)
	stdio := stdioUpstream()
	stdio.MaxSessions = 2
	for _, up := range []gateway.Upstream{stdio, {Name: "up", URL: hs.URL, MaxSessions: 2}} {
		kind := "stdio"
		if up.URL != "" {
			kind = "http"
		}
		t.Run(kind, func(t *testing.T) {
			url, logs := tenantsGateway(t, up)
			for _, wire := range []string{client.Wire20260728, client.Wire20251125} {
				t.Run(wire, func(t *testing.T) { lateRequestsAttack(t, url, wire, logs) })
			}
		})
	}
}

func lateRequestsAttack(t *testing.T, url, wire string, logs *proctest.Buffer) {
	ctx := t.Context()
	dial := func(token string, asked *[]string, mu *sync.Mutex) *client.Client {
		c, err := client.Dial(ctx, url, &client.Options{ProtocolVersion: wire, BearerToken: token,
			Elicit: func(_ context.Context, _ string, p *mcp.ElicitParams) (*mcp.ElicitResult, error) {
				mu.Lock()
				*asked = append(*asked, p.Message)
				mu.Unlock()
				return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"answer": token + "'s secret"}}, nil
			}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	var mu sync.Mutex
	var aliceAsked, bobAsked []string
	alice, bob := dial("alice", &aliceAsked, &mu), dial("bob", &bobAsked, &mu)

	dir := t.TempDir()
	late := filepath.Join(dir, "late")
	call, err := alice.CallTool(ctx, "late", map[string]any{"marker": late})
	if err != nil || call.Task == nil {
		t.Fatalf("late: %+v, %v; want a task", call, err)
	}
	if res, err := alice.Wait(ctx, call.Task.ID, nil); err != nil || text(res) != "answered at once" {
		t.Fatalf("alice's call: %q, %v", text(res), err)
	}

	// Bob's call in flight on the upstream.
	block := filepath.Join(dir, "block")
	bcall, err := bob.CallTool(ctx, "block", map[string]any{"marker": block})
	if err != nil || bcall.Task == nil {
		t.Fatalf("block: %+v, %v; want a task", bcall, err)
	}
	waitFile(t, block+".started")

	// The upstream's late requests about alice's call.
	if err := os.WriteFile(late+".go", nil, 0o600); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(late); err == nil {
			break
		}
		st, err := bob.Get(ctx, bcall.Task.ID)
		if err == nil && st.Status == "input_required" {
			t.Fatalf("bob's task asks for input: %+v; alice's question reached another tenant", st)
		}
		if time.Now().After(deadline) {
			t.Fatal("the upstream's late elicitation was never answered")
		}
		time.Sleep(10 * time.Millisecond) // polling bob's task, not timing the test
	}
	outcome, _ := os.ReadFile(late)
	if !strings.HasPrefix(string(outcome), "refused:") {
		t.Errorf("the late elicitation: %s; want it refused", outcome)
	}

	if _, err := bob.Cancel(ctx, bcall.Task.ID); err != nil {
		t.Fatal(err)
	}
	waitFile(t, block)
	st := waitStatus(t, bob, bcall.Task.ID, "cancelled", func(st *client.TaskStatus) bool { return st.Status == "cancelled" })
	if strings.Contains(st.StatusMessage, "alice") {
		t.Errorf("bob's status message: %q", st.StatusMessage)
	}
	page, err := bob.ReadLog(ctx, bcall.Task.ID, 0, 0)
	if err != nil && !errors.Is(err, client.ErrTaskNotFound) {
		t.Fatalf("bob's log: %v", err)
	}
	if page != nil {
		for _, l := range page.Lines {
			if strings.Contains(l.Text, "alice") {
				t.Errorf("bob's task log has alice's line: %+v", l)
			}
		}
	}
	mu.Lock()
	if len(bobAsked) > 0 || len(aliceAsked) > 0 {
		t.Errorf("questions relayed: bob %q, alice %q; want none (the late question belongs to no call)", bobAsked, aliceAsked)
	}
	mu.Unlock()
	if l := logs.String(); strings.Contains(l, "alice-private-data") {
		t.Errorf("the gateway's log carries the payload of the refused request:\n%s", l)
	}
}
