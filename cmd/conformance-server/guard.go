package main

import (
	"fmt"
	"net"

	"github.com/mcptask/mcptask/internal/httpguard"
)

// checkLoopback refuses listen addresses that are not loopback, so that the
// conformance server is never reachable from the network.
func checkLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("bad -addr %q: %v", addr, err)
	}
	if !httpguard.IsLoopbackHost(host) {
		return fmt.Errorf("-addr %q is not a loopback address (use 127.0.0.1, [::1] or localhost)", addr)
	}
	return nil
}
