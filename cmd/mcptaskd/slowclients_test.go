package main

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// TestSlowClientsAreCut: clients that send their request bodies a byte at
// a time hold every connection the server takes (-max-connections); they
// are cut after -body-timeout, and a normal client is served meanwhile.
// (They held their connections for ever, until the server ran out of file
// descriptors for everyone.)
func TestSlowClientsAreCut(t *testing.T) {
	d := startDaemon(t, "slow", filepath.Join(t.TempDir(), "tasks.db"), "-body-timeout", "1s", "-max-connections", "8")
	u, err := url.Parse(d.URL)
	if err != nil {
		t.Fatal(err)
	}
	const slow = 12 // more than the server takes at once
	var wg sync.WaitGroup
	cut := make(chan time.Duration, slow)
	stop := make(chan struct{})
	defer close(stop)
	for range slow {
		conn, err := net.Dial("tcp", u.Host)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		wg.Go(func() {
			start := time.Now()
			fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: 1000\r\n\r\n", u.Path, u.Host)
			go func() { // one byte every 200 ms, until the server cuts us
				for {
					select {
					case <-stop:
						return
					case <-time.After(200 * time.Millisecond):
					}
					if _, err := conn.Write([]byte(" ")); err != nil {
						return
					}
				}
			}()
			buf := make([]byte, 512)
			_ = conn.SetReadDeadline(time.Now().Add(60 * time.Second))
			for {
				if _, err := conn.Read(buf); err != nil {
					cut <- time.Since(start)
					return
				}
			}
		})
	}
	// A normal client is served although slow ones hold the connections.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := d.client(true).CallTool(ctx, "echo", map[string]any{"text": "still served"}); err != nil {
		t.Fatalf("a normal client behind %d slow ones: %v", slow, err)
	}
	for range slow {
		select {
		case <-cut:
		case <-time.After(60 * time.Second):
			t.Fatal("a slow client was never cut")
		}
	}
	wg.Wait()
}
