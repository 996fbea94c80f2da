package client_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/mcptask/mcptask/client"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestConnectCutShortStopsServer connects to a stdio server that never
// answers, with a ctx that expires: Connect returns ctx's error, and by
// then the server's process has exited and been waited for. (On this path
// the go-sdk closes the connection itself; the client's own guard in
// newClient covers the failures where it does not, and is not what this
// test proves.)
func TestConnectCutShortStopsServer(t *testing.T) {
	t.Parallel()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, wire := range []string{"", client.Wire20251125} {
		cmd := exec.Command(self)
		cmd.Env = append(os.Environ(), envSilent+"=1")
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		c, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, "stdio:silent", &client.Options{ProtocolVersion: wire})
		cancel()
		if err == nil {
			c.Close()
			t.Fatalf("wire %q: connected to a server that never answers", wire)
		}
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("wire %q: Connect: %v, want the context's deadline", wire, err)
		}
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("wire %q: Connect returned with the server's process still running", wire)
		}
	}
}
