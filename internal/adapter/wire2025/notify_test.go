package wire2025

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// notifiers counts the goroutines running a conn's notifier.
func notifiers() int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Count(string(buf[:n]), "wire2025.(*conn).notifier")
		}
		buf = make([]byte, 2*len(buf))
	}
}

// awaitNotifiers waits until at most want notifier goroutines run, and
// fails the test if that does not happen within a generous bound (a leak
// never gets there).
func awaitNotifiers(t *testing.T, want int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for notifiers() > want {
		if time.Now().After(deadline) {
			t.Fatalf("%d notifier goroutines still run after the connection closed; want %d", notifiers(), want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// connect connects a client to a server over a connection wrapped for
// status notifications.
func connect(t *testing.T) (*mcp.ServerSession, *mcp.ClientSession) {
	t.Helper()
	srv := mcp.NewServer(&mcp.Implementation{Name: "s", Version: "1"}, nil)
	ct, st := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(context.Background(), &transport{Transport: st}, nil)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "c", Version: "1"}, nil).Connect(context.Background(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	return ss, cs
}

// TestConnNotifierStopsWhenClientDisconnects: a connection wrapped for
// status notifications must not leave its notifier goroutine behind when
// the client goes away (it did, for every connection made through the
// exported mcptask.Transport, which never stopped it).
func TestConnNotifierStopsWhenClientDisconnects(t *testing.T) {
	before := notifiers()
	ss, cs := connect(t)
	if notifiers() != before+1 {
		t.Fatalf("notifiers = %d, want %d while connected", notifiers(), before+1)
	}
	cs.Close()
	_ = ss.Wait()
	awaitNotifiers(t, before)
}

// TestConnNotifierStopsWhenServerCloses: closing the session from the
// server's side stops the notifier too.
func TestConnNotifierStopsWhenServerCloses(t *testing.T) {
	before := notifiers()
	ss, cs := connect(t)
	defer cs.Close()
	ss.Close()
	awaitNotifiers(t, before)
}
