package mcptask_test

import (
	"bufio"
	"io"
	"net"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/mcptask/mcptask"
	"github.com/mcptask/mcptask/internal/testkit/wiretest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

var dateHdr = regexp.MustCompile(`(?m)^Date: .*\r\n`)

// TestFastLane2025HTTP10: the same 2025-11-25 tasks/get (and a finished
// tasks/result) over HTTP/1.0 (and 1.1 with Connection: close), raw
// bytes compared, Date left out.
func TestFastLane2025HTTP10(t *testing.T) {
	for _, json := range []bool{false, true} {
		g := &gates{}
		p := startLanePairSessions(t, g, mcptask.Options{}, mcp.StreamableHTTPOptions{JSONResponse: json}, false, laneSessionID)
		ctx := ctxT(t)
		setup := &wiretest.Session{URL: p.setup}
		if _, err := setup.Initialize(ctx); err != nil {
			t.Fatal(err)
		}
		for _, u := range []string{p.fast, p.slow} {
			s := &wiretest.Session{URL: u}
			if _, err := s.Initialize(ctx); err != nil {
				t.Fatal(err)
			}
		}
		ids := laneTasks25(t, setup, g)
		for _, proto := range []string{"HTTP/1.0", "HTTP/1.1"} {
			for _, m := range []string{"tasks/get", "tasks/result"} {
				body := `{"jsonrpc":"2.0","id":7,"method":"` + m + `","params":{"taskId":"` + ids["completed"] + `"}}`
				raw := func(u string) string {
					pu, _ := url.Parse(u)
					c, err := net.Dial("tcp", pu.Host)
					if err != nil {
						t.Fatal(err)
					}
					defer c.Close()
					req := "POST / " + proto + "\r\nHost: " + pu.Host + "\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n" +
						"Mcp-Protocol-Version: 2025-11-25\r\nMcp-Session-Id: " + laneSessionID + "\r\nConnection: close\r\nContent-Length: " +
						itoa(len(body)) + "\r\n\r\n" + body
					if _, err := io.WriteString(c, req); err != nil {
						t.Fatal(err)
					}
					b, _ := io.ReadAll(bufio.NewReader(c))
					return dateHdr.ReplaceAllString(string(b), "")
				}
				fast, slow := raw(p.fast), raw(p.slow)
				if fast != slow {
					t.Errorf("json=%v %s %s:\nfast lane:\n%s\ngo-sdk:\n%s", json, proto, m, fast, slow)
				} else if !strings.Contains(fast, "200 OK") {
					t.Errorf("json=%v %s %s: %s", json, proto, m, fast)
				}
			}
		}
	}
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	var b []byte
	for ; n > 0; n /= 10 {
		b = append([]byte{byte('0' + n%10)}, b...)
	}
	return string(b)
}
