package client

import (
	"context"
	"fmt"

	"github.com/mcptask/mcptask/wire/ext2026"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// wireStrategy is one task wire's side of the client: how a tools/call
// asks for a task, and how a task is fetched, cancelled, listed and waited
// for. The client picks one when it connects (newWireStrategy) and leaves
// every wire-specific decision to it; what both wires share (the journal,
// polling and jitter, the input handlers, the error types) stays in the
// client.
//
// Errors come back ready for the host: a task the server does not know is
// ErrTaskNotFound, an operation the wire lacks ErrUnsupported.
type wireStrategy interface {
	// tasksSupported reports whether the server offers tasks on this wire.
	tasksSupported() bool
	// taskSupport returns a listed tool's execution.taskSupport, "" when
	// unknown or when the wire has no such field.
	taskSupport(tool string) string
	// prepareCall readies a tools/call to run as a task where the server
	// and the tool allow it. It returns why the call runs plainly, "" when
	// the client accepts a task, and whether the call, carrying an
	// idempotency key, may be re-sent: the server honours keys
	// (wire.ExtensionIdempotency) and answers this call with a task.
	prepareCall(ctx context.Context, params *mcp.CallToolParams) (fallback string, resendable bool, err error)
	// get returns a task's current status.
	get(ctx context.Context, id string) (*TaskStatus, error)
	// cancel asks for a task's cancellation and returns its status after.
	cancel(ctx context.Context, id string) (*TaskStatus, error)
	// deleteAdvertised reports whether the server advertised mcptask's
	// tasks/delete on this wire, and if not, why it is unsupported.
	deleteAdvertised() (bool, string)
	// list returns a page of the requester's tasks and the next cursor.
	list(ctx context.Context, cursor string) ([]TaskStatus, string, error)
	// wait waits for w's task to end and returns its outcome (see
	// Client.Wait).
	wait(w *waiter) (*mcp.CallToolResult, error)
	// forget drops what the wire remembers of an ended task.
	forget(id string)
}

// newWireStrategy returns the strategy of the wire the session negotiated:
// 2026-07-28 (and any later revision), 2025-11-25, or none for the
// revisions without tasks.
func newWireStrategy(c *clientImpl, init *mcp.InitializeResult) wireStrategy {
	switch {
	case c.wire >= Wire20260728:
		extension := false
		if init.Capabilities != nil {
			_, extension = init.Capabilities.Extensions[ext2026.ExtensionID]
		}
		return newWire2026(c, extension)
	case c.wire == Wire20251125:
		return newWire2025(c)
	}
	return wireNone{version: c.wire}
}

// getError is the error of a failed tasks/get: ErrTaskNotFound for the
// server's "no such task", else err with the task and the method.
func getError(id string, err error) error {
	if isNotFound(err) {
		return notFound(id, err)
	}
	return fmt.Errorf("task %s: tasks/get: %w", id, err)
}
