package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/mcptask/mcptask/client"
)

// newHTTPServer serves h on loopback for the test's duration.
func newHTTPServer(t *testing.T, h http.Handler) string {
	t.Helper()
	hs := httptest.NewServer(h)
	t.Cleanup(func() {
		hs.CloseClientConnections()
		hs.Close()
	})
	return hs.URL + "/mcp"
}

// TestGarbageServer connects to servers that answer junk: a clear error,
// promptly.
func TestGarbageServer(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, ctype, body string
		status            int
	}{
		{"HTML page", "text/html", "<html><body>It works!</body></html>", 200},
		{"broken JSON", "application/json", "{{{{ not json", 200},
		{"JSON that is no JSON-RPC", "application/json", `{"hello":"world"}`, 200},
		{"broken event stream", "text/event-stream", "data: {{{ not json\n\n", 200},
		{"server error", "text/plain", "internal error", 500},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url := newHTTPServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				io.Copy(io.Discard, r.Body)
				w.Header().Set("Content-Type", tc.ctype)
				w.WriteHeader(tc.status)
				io.WriteString(w, tc.body)
			}))
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			start := time.Now()
			c, err := client.Dial(ctx, url, nil)
			if err == nil {
				c.Close()
				t.Fatal("Dial succeeded against a server answering junk")
			}
			if took := time.Since(start); took > 10*time.Second {
				t.Fatalf("Dial took %v to fail", took)
			}
			if !strings.Contains(err.Error(), "connecting to "+url) {
				t.Errorf("error does not name the server: %v", err)
			}
			t.Logf("error: %v", err)
		})
	}
}

// TestGarbageTaskAnswers serves mcptask but answers tasks/get with junk:
// Wait ends with a clear error, promptly. The waits poll (DisablePush):
// with push, a 2026-07-28 wait sends no tasks/get.
func TestGarbageTaskAnswers(t *testing.T) {
	t.Parallel()
	s := newServer(t, serverOpts{})
	for _, tc := range []struct {
		name   string
		answer func(id json.RawMessage, taskID string) (ctype, body string)
		want   string
	}{
		{"unknown status", func(id json.RawMessage, taskID string) (string, string) {
			return "application/json", fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"resultType":"complete","taskId":%q,"status":"exploded","ttlMs":1,"pollIntervalMs":1}}`, id, taskID)
		}, `unknown status "exploded"`},
		{"wrong types", func(id json.RawMessage, taskID string) (string, string) {
			return "application/json", fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"taskId":%q,"status":42}}`, id, taskID)
		}, "not a task"},
		{"another task", func(id json.RawMessage, _ string) (string, string) {
			return "application/json", fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"taskId":"someoneelse","status":"working","ttl":null}}`, id)
		}, "with task someoneelse"},
		{"not JSON", func(json.RawMessage, string) (string, string) {
			return "application/json", "<<garbage>>"
		}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url := newHTTPServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				r.Body = io.NopCloser(bytes.NewReader(body))
				var msg struct {
					ID     json.RawMessage `json:"id"`
					Method string          `json:"method"`
					Params struct {
						TaskID string `json:"taskId"`
					} `json:"params"`
				}
				if json.Unmarshal(body, &msg) == nil && msg.Method == "tasks/get" {
					ctype, out := tc.answer(msg.ID, msg.Params.TaskID)
					w.Header().Set("Content-Type", ctype)
					io.WriteString(w, out)
					return
				}
				proxy(w, r, s.URL)
			}))
			for _, wire := range wires {
				c := dial(t, url, &client.Options{ProtocolVersion: wire, DisablePush: true})
				tk := startTask(t, c, "long_computation", map[string]any{"n": 10, "steps": 1, "step_delay_ms": 0})
				start := time.Now()
				_, err := c.Wait(testCtx(t), tk.ID, &client.WaitOptions{Deadline: 30 * time.Second})
				if err == nil || errors.Is(err, client.ErrDeadline) || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("%s: Wait: %v", wire, err)
				}
				if took := time.Since(start); took > 10*time.Second {
					t.Fatalf("%s: Wait took %v to fail", wire, took)
				}
				t.Logf("%s: %v", wire, err)
			}
		})
	}
}

// proxy forwards a request to the real server.
func proxy(w http.ResponseWriter, r *http.Request, url string) {
	req, err := http.NewRequestWithContext(r.Context(), r.Method, url, r.Body)
	if err != nil {
		http.Error(w, err.Error(), 500)
		return
	}
	req.Header = r.Header.Clone()
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		http.Error(w, err.Error(), 502)
		return
	}
	defer resp.Body.Close()
	for k, vs := range resp.Header {
		w.Header()[k] = vs
	}
	w.WriteHeader(resp.StatusCode)
	fl, _ := w.(http.Flusher)
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 {
			w.Write(buf[:n])
			if fl != nil {
				fl.Flush()
			}
		}
		if err != nil {
			return
		}
	}
}
