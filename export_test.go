package mcptask

import (
	"net/http"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// FastLaneServed returns how many requests s answered on the fast lane.
func FastLaneServed(s *Server) uint64 { return s.fastServed.Load() }

// MarkFastLaneCall notes a call with the ID id in flight on the fast lane
// of h (a Server.Handler) for the 2025-11-25 session sid, as while the
// lane answers it; the returned function ends it.
func MarkFastLaneCall(h http.Handler, sid string, id int64) (end func()) {
	ls := h.(*wireRouter).fast.sessions
	key := []string{idKey(mustID(id))}
	ls.count(sid, key, true, 1)
	return func() { ls.count(sid, key, true, -1) }
}

func mustID(v int64) jsonrpc.ID {
	id, err := jsonrpc.MakeID(float64(v))
	if err != nil {
		panic(err)
	}
	return id
}
