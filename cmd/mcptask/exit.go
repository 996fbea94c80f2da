package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/mcptask/mcptask/client"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// Exit codes of mcptask, the one place they are defined. The help text and
// the README list them from exitCodes.
const (
	exitOK          = 0   // the tool succeeded (or the command did what it was asked)
	exitToolError   = 1   // the tool's result has isError: true
	exitFailed      = 2   // the task failed with a JSON-RPC error, or the server refused the call (or the deletion of a running task)
	exitCancelled   = 3   // the task was cancelled
	exitConnection  = 4   // the server is unreachable or answered garbage, or does not know the task
	exitUsage       = 5   // the command line is wrong
	exitDeadline    = 6   // --timeout passed while the task still runs
	exitUnmet       = 7   // 'mcptask manifest --require': the server does not meet the workflow's needs
	exitSampling    = 8   // the task asks for sampling, which mcptask cannot answer; it still waits
	exitInterrupted = 130 // Ctrl-C (or SIGTERM) stopped the wait; the task still runs
)

// exitCodes documents the exit codes, in the help text and the README.
var exitCodes = []struct {
	code    int
	meaning string
}{
	{exitOK, "success: the tool's result is printed"},
	{exitToolError, "tool error: the tool completed with isError: true (its result is printed), as a server does for arguments its input schema rejects that mcptask could not check"},
	{exitFailed, "failed: the task failed with a JSON-RPC error, or the server refused the call (an unknown tool) or a request (its words are printed), the deletion of a task that has not ended (cancel it first), or a cancel (the system doing the task's work refused it: the task goes on, the reason is printed)"},
	{exitCancelled, "cancelled: the task was cancelled"},
	{exitConnection, "connection or protocol error: server unreachable, garbage answer, a task the server does not know, or a call whose answer was lost (outcome unknown: 'mcptask resume' finishes it)"},
	{exitUsage, "usage error: bad command, flag or argument, arguments that break the tool's input schema (nothing was called), an answer that does not fit the task's question (nothing was sent; the task still waits), or --detach of a tool that forbids tasks"},
	{exitDeadline, "deadline: --timeout passed while the task still runs (its ID is printed; 'mcptask wait ID' later)"},
	{exitUnmet, "unmet requirements: 'mcptask manifest --require' found a need the server does not meet and whose fallback is not allowed (each is printed with its fallback)"},
	{exitSampling, "sampling: the task asks the client for an LLM completion, which mcptask cannot answer (it has no model); the task still waits: answer it from a host, or wait on with --wait-sampling"},
	{exitInterrupted, "interrupted (Ctrl-C): the wait stopped, the task still runs ('mcptask resume' later)"},
}

// exitCodesText renders exitCodes for the help text.
func exitCodesText() string {
	var b strings.Builder
	for _, e := range exitCodes {
		fmt.Fprintf(&b, "  %-4d %s\n", e.code, e.meaning)
	}
	return b.String()
}

// errInterrupted is the cause of the main context's cancellation when a
// signal asked mcptask to stop.
var errInterrupted = errors.New("interrupted")

// usageError is a mistake on the command line.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{fmt.Sprintf(format, args...)}
}

// errWaitDeadline is the cause of a wait's context when --timeout passed.
var errWaitDeadline = errors.New("deadline passed")

// refusedError is a JSON-RPC error with which the server answered a
// tools/call: it refused the call (unknown tool, invalid params, a failed
// plain call, ...).
type refusedError struct{ err error }

func (e *refusedError) Error() string { return e.err.Error() }
func (e *refusedError) Unwrap() error { return e.err }

// exitCodeOf maps an error of the client (or of mcptask) to an exit code.
func exitCodeOf(ctx context.Context, err error) int {
	var te *client.TaskError
	var ue *usageError
	var re *refusedError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ue), errors.As(context.Cause(ctx), &ue):
		return exitUsage
	case errors.As(err, new(*samplingError)), errors.As(context.Cause(ctx), new(*samplingError)):
		return exitSampling
	case errors.Is(err, errInterrupted) || errors.Is(context.Cause(ctx), errInterrupted):
		return exitInterrupted
	case errors.As(err, &te):
		return exitFailed
	case errors.Is(err, client.ErrCancelled):
		return exitCancelled
	case errors.Is(err, client.ErrNotTerminal), errors.Is(err, client.ErrCancelRefused):
		return exitFailed
	case errors.Is(err, client.ErrDeadline), errors.Is(err, errWaitDeadline):
		return exitDeadline
	case errors.As(err, &re):
		return exitFailed
	case isInvalidParams(err):
		// The server refused the request in its own words (not "no such
		// task", which is ErrTaskNotFound).
		return exitFailed
	default:
		return exitConnection
	}
}

// isInvalidParams reports whether err is the server's -32602 answer.
func isInvalidParams(err error) bool {
	var je *jsonrpc.Error
	return errors.As(err, &je) && je.Code == jsonrpc.CodeInvalidParams
}
