package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mcptask/mcptask/internal/testkit/wiretest"
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

// writeTokensFile writes a tokens file in dir granting each token (the
// map's key) to its principal of the tenant "acme", and returns its path.
func writeTokensFile(t *testing.T, dir string, tokens map[string]string) string {
	t.Helper()
	var entries []string
	for tok, principal := range tokens {
		entries = append(entries, fmt.Sprintf(`{"token": %q, "principal": %q, "tenant": "acme"}`, tok, principal))
	}
	path := filepath.Join(dir, "tokens.json")
	if err := os.WriteFile(path, []byte("["+strings.Join(entries, ",")+"]"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// dialFrom dials addr from the loopback address local (e.g. 127.0.0.2),
// so that a test has several sources on one machine.
func dialFrom(t *testing.T, local, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}}
	conn, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// httpClientFrom returns an HTTP client whose connections come from the
// loopback address local.
func httpClientFrom(local string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(local)}}
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DialContext: d.DialContext}}
}

// slowBody is one raw connection that sent a POST's headers (with the
// given extra header lines) and trickles its body a byte every 100 ms
// until the server closes the connection or the test ends.
type slowBody struct {
	conn  net.Conn
	start time.Time
}

func startSlowBody(t *testing.T, conn net.Conn, host string, extra string, stop <-chan struct{}) *slowBody {
	t.Helper()
	s := &slowBody{conn: conn, start: time.Now()}
	if _, err := fmt.Fprintf(conn, "POST /mcp HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\n%sContent-Length: 1000\r\n\r\n", host, extra); err != nil {
		t.Fatal(err)
	}
	go func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			if _, err := conn.Write([]byte(" ")); err != nil {
				return
			}
		}
	}()
	return s
}

// answer reads the server's answer and then waits until the server closes
// the connection; it returns the answer and how long after the headers
// each came (closed is 0 if the server did not close within the read
// deadline).
func (s *slowBody) answer(deadline time.Duration) (resp *http.Response, answered, closed time.Duration, err error) {
	_ = s.conn.SetReadDeadline(s.start.Add(deadline))
	br := bufio.NewReader(s.conn)
	resp, err = http.ReadResponse(br, nil)
	if err != nil {
		return nil, 0, 0, err
	}
	answered = time.Since(s.start)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if _, rerr := br.ReadByte(); rerr == io.EOF || errors.Is(rerr, syscall.ECONNRESET) {
		closed = time.Since(s.start)
	}
	return resp, answered, closed, nil
}

// TestSlowBodyWithoutTokenRefusedAtOnce (issue 25, H2): with -tokens, a
// client without a token that trickles its request body gets its 401 at
// once, with Connection: close, and the server closes the connection,
// although the body is still coming and -body-timeout is a minute; 200 of
// them at once leave /healthz and a token holder served. (The 401 came
// only after -body-timeout: net/http drained the unread body before
// answering, so each such socket held a connection for the whole timeout
// and 600 of them took /healthz down.)
func TestSlowBodyWithoutTokenRefusedAtOnce(t *testing.T) {
	dir := t.TempDir()
	const token = "holder-token-0123456789"
	d := startDaemon(t, "slowauth", filepath.Join(dir, "tasks.db"), "-tokens", writeTokensFile(t, dir, map[string]string{token: "holder"}),
		"-body-timeout", "60s")
	u, err := url.Parse(d.URL)
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	defer close(stop)
	const n = 200
	slow := make([]*slowBody, n)
	for i := range slow {
		slow[i] = startSlowBody(t, dialFrom(t, "127.0.0.1", u.Host), u.Host, "", stop)
	}
	// While they trickle: /healthz and a token holder are served (from
	// another source: past -max-connections-per-source, the slow bodies'
	// source is refused new connections until its own close).
	other := httpClientFrom("127.0.0.2")
	resp, err := other.Get(d.Base + "/healthz")
	if err != nil {
		t.Fatalf("/healthz behind %d slow bodies without a token: %v", n, err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/healthz: %d", resp.StatusCode)
	}
	holder := d.client(true)
	holder.HTTP = other
	holder.Header = http.Header{"Authorization": {"Bearer " + token}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := holder.CallTool(ctx, "echo", map[string]any{"text": "served"}); err != nil {
		t.Fatalf("a token holder behind %d slow bodies without a token: %v", n, err)
	}
	// Each slow body was refused long before -body-timeout (60 s), and
	// its connection closed, while it was still trickling.
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i, s := range slow {
		wg.Go(func() {
			resp, answered, closed, err := s.answer(20 * time.Second)
			switch {
			case err != nil:
				errs <- fmt.Errorf("slow body %d: no answer within 20 s (-body-timeout 60s): %v", i, err)
			case resp.StatusCode != http.StatusUnauthorized && resp.StatusCode != http.StatusTooManyRequests:
				errs <- fmt.Errorf("slow body %d: %d, want 401 (or 429 past the per-source budget)", i, resp.StatusCode)
			case !resp.Close: // Connection: close
				errs <- fmt.Errorf("slow body %d: %d without Connection: close", i, resp.StatusCode)
			case answered > 10*time.Second:
				errs <- fmt.Errorf("slow body %d: answered after %v", i, answered)
			case closed == 0:
				errs <- fmt.Errorf("slow body %d: the server kept the connection open after its %d", i, resp.StatusCode)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// rawToolsList sends a 2026-07-28 tools/list with token on conn (kept
// open) and returns the answer, its body read.
func rawToolsList(t *testing.T, conn net.Conn, br *bufio.Reader, base, token string) *http.Response {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": map[string]any{"_meta": (&wiretest.Client{}).Meta()}})
	req, err := http.NewRequest(http.MethodPost, base+"/mcp", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "tools/list")
	req.Header.Set("Authorization", "Bearer "+token)
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	if err := req.Write(conn); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

// TestConnectionBudgets (issue 25, H2): with authentication, one source's
// connections that no request has authenticated yet, and one principal's
// connections, are capped: one more is answered 429 with Connection:
// close and closed, while /healthz and other sources and principals are
// served; a closed connection frees its place.
func TestConnectionBudgets(t *testing.T) {
	dir := t.TempDir()
	const holder, other = "holder-token-0123456789", "other-token-0123456789"
	d := startDaemon(t, "budgets", filepath.Join(dir, "tasks.db"),
		"-tokens", writeTokensFile(t, dir, map[string]string{holder: "holder", other: "other"}),
		"-max-connections-per-source", "4", "-max-connections-per-principal", "2")
	u, err := url.Parse(d.URL)
	if err != nil {
		t.Fatal(err)
	}
	// 127.0.0.3 opens 4 connections and sends nothing; its 5th is refused.
	for range 4 {
		dialFrom(t, "127.0.0.3", u.Host)
	}
	s := &slowBody{conn: dialFrom(t, "127.0.0.3", u.Host), start: time.Now()}
	resp, _, closed, err := s.answer(20 * time.Second)
	if err != nil {
		t.Fatalf("a 5th connection of a source with 4 open: %v", err)
	}
	if resp.StatusCode != http.StatusTooManyRequests || !resp.Close || resp.Header.Get("Retry-After") == "" || closed == 0 {
		t.Fatalf("a 5th connection of a source with 4 open: %d, Connection: close %v, Retry-After %q, closed %v; want 429, close, a Retry-After, closed",
			resp.StatusCode, resp.Close, resp.Header.Get("Retry-After"), closed != 0)
	}
	// Other sources are served: /healthz and a token holder.
	if resp, err := httpClientFrom("127.0.0.1").Get(d.Base + "/healthz"); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("/healthz from another source: %v %v", resp, err)
	}
	// A principal has 2 connections; its 3rd is refused at its first
	// request, and the others' are served.
	var conns []net.Conn
	for i := range 3 {
		c := dialFrom(t, "127.0.0.2", u.Host)
		conns = append(conns, c)
		resp := rawToolsList(t, c, bufio.NewReader(c), d.Base, holder)
		switch {
		case i < 2 && (resp.StatusCode != http.StatusOK || resp.Close):
			t.Fatalf("the holder's connection %d: %d (close %v), want 200 kept open", i+1, resp.StatusCode, resp.Close)
		case i == 2 && (resp.StatusCode != http.StatusTooManyRequests || !resp.Close):
			t.Fatalf("the holder's 3rd connection: %d (close %v), want 429 with Connection: close", resp.StatusCode, resp.Close)
		}
	}
	c := dialFrom(t, "127.0.0.2", u.Host)
	if resp := rawToolsList(t, c, bufio.NewReader(c), d.Base, other); resp.StatusCode != http.StatusOK {
		t.Fatalf("another principal beside the holder's 2 connections: %d", resp.StatusCode)
	}
	// The holder closes one: a new connection of its is served (once the
	// server has seen the close).
	conns[0].Close()
	waitUntil(t, 30*time.Second, "the holder's closed connection to free its place", func() (bool, error) {
		c := dialFrom(t, "127.0.0.2", u.Host)
		defer c.Close()
		return rawToolsList(t, c, bufio.NewReader(c), d.Base, holder).StatusCode == http.StatusOK, nil
	})
}
