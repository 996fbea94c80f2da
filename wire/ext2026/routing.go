package ext2026

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"

	"github.com/mcptask/mcptask/wire"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	segjson "github.com/segmentio/encoding/json"
)

// RoutingGuard wraps a Streamable HTTP handler with the SEP-2243 routing
// check the go-sdk does not make for the tasks methods: on a 2026-07-28
// request for tasks/get, tasks/update, tasks/cancel or tasks/delete, the Mcp-Name header
// must equal params.taskId. A mismatch is answered with HTTP 400 and a
// JSON-RPC -32020 error that echoes the request id. Other requests pass
// through untouched, without their body being read.
func RoutingGuard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || !isTasksMethod(r.Header.Get("Mcp-Method")) ||
			r.Header.Get("Mcp-Protocol-Version") < Version {
			next.ServeHTTP(w, r)
			return
		}
		body, err := io.ReadAll(io.LimitReader(r.Body, maxRoutedBody+1))
		r.Body.Close()
		if err != nil || len(body) > maxRoutedBody {
			http.Error(w, "request body too large or unreadable", http.StatusRequestEntityTooLarge)
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		if id, bad := RoutingMismatch(r.Header, body); bad {
			writeHeaderMismatch(w, id, "the Mcp-Name header must equal params.taskId")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// RoutingMismatch reports whether [RoutingGuard] refuses a tasks request
// whose headers are h and whose body is body (the guard having already
// checked method, Mcp-Method and protocol version), and if so the request
// id its answer echoes. A malformed body, a body whose method is not a
// tasks method, or one without params.taskId is not refused here: the SDK
// answers it.
func RoutingMismatch(h http.Header, body []byte) (id json.RawMessage, mismatch bool) {
	return routingMismatch(h, body, decodeRouted)
}

// routed is what the guard reads of a request.
type routed struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		TaskID *string `json:"taskId"`
	} `json:"params"`
}

// routingMismatch is RoutingMismatch with the body decoded by decode.
func routingMismatch(h http.Header, body []byte, decode func([]byte, *routed) error) (json.RawMessage, bool) {
	var msg routed
	if decode(body, &msg) != nil || !isTasksMethod(msg.Method) || msg.Params.TaskID == nil {
		return nil, false
	}
	if strings.TrimSpace(h.Get("Mcp-Name")) == *msg.Params.TaskID {
		return nil, false
	}
	return msg.ID, true
}

// decodeRouted decodes body into msg as encoding/json does (names matched
// case-insensitively, the last of duplicates kept): a body that is one
// valid JSON value of ASCII bytes with the go-sdk's decoder, which decodes
// it the same in a fifth of the time (FuzzDecodeRouted compares them),
// any other with encoding/json.
func decodeRouted(body []byte, msg *routed) error {
	for _, c := range body {
		if c >= 0x80 {
			return json.Unmarshal(body, msg)
		}
	}
	if !json.Valid(body) {
		return json.Unmarshal(body, msg)
	}
	_, err := segjson.Parse(body, msg, 0)
	return err
}

// maxRoutedBody bounds the tasks request bodies the guard reads.
const maxRoutedBody = 8 << 20

func isTasksMethod(m string) bool {
	switch m {
	case wire.MethodTasksGet, wire.MethodTasksUpdate, wire.MethodTasksCancel, wire.MethodTasksDelete:
		return true
	}
	return false
}

func writeHeaderMismatch(w http.ResponseWriter, id json.RawMessage, msg string) {
	if len(id) == 0 {
		id = json.RawMessage("null")
	}
	resp := struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   struct {
			Code    int64  `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}{JSONRPC: "2.0", ID: id}
	resp.Error.Code = mcp.CodeHeaderMismatch
	resp.Error.Message = msg
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadRequest)
	_ = json.NewEncoder(w).Encode(resp)
}
