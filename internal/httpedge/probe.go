package httpedge

import (
	"bytes"
	"encoding/json"
	"net/http"
	"slices"
	"strings"

	"github.com/mcptask/mcptask/wire/ext2026"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// probeBody is the server/discover request the fast lane sends, once,
// through the go-sdk's own stateless handler, to learn what the go-sdk
// adds to each 2026-07-28 answer (its serverInfo) and whether it serves
// that revision at all.
const probeBody = `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{"_meta":{` +
	`"io.modelcontextprotocol/protocolVersion":"2026-07-28",` +
	`"io.modelcontextprotocol/clientInfo":{"name":"mcptask-fast-lane-probe","version":"1"},` +
	`"io.modelcontextprotocol/clientCapabilities":{}}}}`

// probe asks the go-sdk handler slow for its server/discover answer and
// returns the serverInfo in it; ok is false (and the lane stays off) when
// the answer is not a result of a server serving 2026-07-28. It goes
// through the go-sdk's public edge, an HTTP request to its handler, so
// that the lane never reads the go-sdk's unexported state.
func probe(slow http.Handler) (impl *mcp.Implementation, versions []string, ok bool) {
	req, err := http.NewRequest(http.MethodPost, "http://localhost/mcp", strings.NewReader(probeBody))
	if err != nil {
		return nil, nil, false
	}
	req.RemoteAddr = "192.0.2.1:1234" // as a test request's: no listener
	req.RequestURI = "/mcp"
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", ext2026.Version)
	req.Header.Set("Mcp-Method", "server/discover")
	rec := &recorder{header: http.Header{}}
	slow.ServeHTTP(rec, req)
	if rec.status() != http.StatusOK {
		return nil, nil, false
	}
	body := rec.body.Bytes()
	if ct := rec.header.Get("Content-Type"); strings.HasPrefix(ct, "text/event-stream") {
		// One event: its data line holds the answer.
		for line := range bytes.SplitSeq(body, []byte("\n")) {
			if d, found := bytes.CutPrefix(line, []byte("data:")); found {
				body = bytes.TrimSpace(d)
				break
			}
		}
	}
	var resp struct {
		Result *struct {
			Meta              map[string]json.RawMessage `json:"_meta"`
			SupportedVersions []string                   `json:"supportedVersions"`
		} `json:"result"`
	}
	if json.Unmarshal(body, &resp) != nil || resp.Result == nil ||
		!slices.Contains(resp.Result.SupportedVersions, ext2026.Version) {
		return nil, nil, false
	}
	raw, found := resp.Result.Meta[mcp.MetaKeyServerInfo]
	if !found || json.Unmarshal(raw, &impl) != nil || impl == nil {
		return nil, nil, false
	}
	return impl, resp.Result.SupportedVersions, true
}

// recorder is the http.ResponseWriter of the probe: it keeps the status,
// the headers and the body of the go-sdk's answer.
type recorder struct {
	header http.Header
	code   int // 0 until the header is written
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(code int) {
	if r.code == 0 {
		r.code = code
	}
}

func (r *recorder) Write(p []byte) (int, error) {
	r.WriteHeader(http.StatusOK)
	return r.body.Write(p)
}

// Flush does nothing: the answer is read once the handler returns.
func (r *recorder) Flush() {}

// status is the answer's status: 200 when the handler wrote a body
// without one, or nothing at all.
func (r *recorder) status() int {
	if r.code == 0 {
		return http.StatusOK
	}
	return r.code
}
