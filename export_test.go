package mcptask

import (
	"context"
	"net/http"
	"time"

	"github.com/mcptask/mcptask/internal/httpedge"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// FastLaneServed returns how many requests s answered on the fast lane.
func FastLaneServed(s *Server) uint64 { return s.fastServed.Load() }

// CloseLaneSession closes s's own session of the fast lane, as the program
// closing the server's sessions would, and waits until s knows it.
func CloseLaneSession(s *Server) {
	ss := s.lane.Get(s.mcp)
	ss.Close()
	for s.lane.Connected(ss) {
		time.Sleep(time.Millisecond)
	}
}

// MarkFastLaneCall notes a call with the ID id in flight on the fast lane
// of h (a Server.Handler) for the 2025-11-25 session sid, as while the
// lane answers it; the returned function ends it.
func MarkFastLaneCall(h http.Handler, sid string, id int64) (end func()) {
	return h.(*httpedge.Handler).CallInFlight(sid, mustID(id))
}

func mustID(v int64) jsonrpc.ID {
	id, err := jsonrpc.MakeID(float64(v))
	if err != nil {
		panic(err)
	}
	return id
}

// ExpireApprovals runs the sweep of expired approvals of s as if at
// after from now.
func ExpireApprovals(s *Server, after time.Duration) {
	s.sweepApprovals(context.Background(), s.eng.Now().Add(after))
}
