package mcptask

// FastLaneServed returns how many requests s answered on the fast lane.
func FastLaneServed(s *Server) uint64 { return s.fastServed.Load() }
