package client

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/mcptask/mcptask/wire"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// OutcomeUnknownError is the error of a tool call whose answer never came
// (the connection failed, the reply was lost): the server may or may not
// have run it. When the call carried an idempotency key and the journal
// holds it, [Client.Resume] finishes it by sending it again with the same
// key, which returns the task the server created, if it did, and creates
// it otherwise: one task, one run. Never call the tool again yourself.
type OutcomeUnknownError struct {
	Tool string
	// Key is the call's idempotency key, "" when it had none (the server
	// does not honour keys, or the tool does not run as a task): such a
	// call cannot be finished safely.
	Key string
	// Journaled reports whether the journal records the call for Resume.
	Journaled bool
	// Err is the last transport error.
	Err error
}

func (e *OutcomeUnknownError) Error() string {
	msg := fmt.Sprintf("outcome unknown: the call of %s got no answer (%v); the server may or may not have started it", e.Tool, e.Err)
	switch {
	case e.Key != "" && e.Journaled:
		return msg + "; resume finishes it (it re-sends the call with its idempotency key: one task, one run)"
	case e.Key != "":
		return msg + "; re-send it with the same idempotency key " + e.Key + " to learn its task (no journal records it)"
	}
	return msg + "; it cannot be re-sent safely: check the server before calling the tool again"
}

// Unwrap returns the transport error.
func (e *OutcomeUnknownError) Unwrap() error { return e.Err }

// ErrOutcomeUnknown is what errors.Is finds in an [OutcomeUnknownError].
var ErrOutcomeUnknown = errors.New("outcome unknown")

// Is makes errors.Is(err, ErrOutcomeUnknown) hold.
func (e *OutcomeUnknownError) Is(target error) bool { return target == ErrOutcomeUnknown }

// Re-sending a create whose answer was lost: how often, and how long to
// wait between tries (doubling).
const (
	createTries       = 4
	createRetryWait   = 200 * time.Millisecond
	createRetryWaitMx = 2 * time.Second
)

// NotSentError is the error of a call that was never sent: what the
// client asks the server first (e.g. whether the tool supports tasks) got
// no answer. Nothing was started; the call may simply be made again.
type NotSentError struct {
	Tool string
	// Err is why the preliminary request failed.
	Err error
}

func (e *NotSentError) Error() string {
	return fmt.Sprintf("the call of %s was not sent (nothing was started): %v", e.Tool, e.Err)
}

func (e *NotSentError) Unwrap() error { return e.Err }

// codeRejected is the go-sdk's code of a request lost in its transport.
const codeRejected = wire.CodeRejectedByTransport

// answered reports whether err is the server's own answer (a JSON-RPC error
// it sent): the call was refused, not lost.
func answered(err error) bool {
	var je *jsonrpc.Error
	return errors.As(err, &je) && je.Code != codeRejected && !storeUnavailable(err)
}

// newIdempotencyKey returns a fresh idempotency key.
func newIdempotencyKey() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return "mcptask-" + hex.EncodeToString(b)
}

func (c *clientImpl) callTool(ctx context.Context, name string, args any, refuseUnknown bool) (*Call, error) {
	params := &mcp.CallToolParams{Name: name, Arguments: args}
	fallback, resendable, err := c.tw.prepareCall(ctx, params)
	if err != nil {
		if !answered(err) && ctx.Err() == nil {
			return nil, &NotSentError{Tool: name, Err: err}
		}
		return nil, err
	}
	c.requestMeta(ctx, &params.Meta)
	if refuseUnknown {
		if params.Meta == nil {
			params.Meta = mcp.Meta{}
		}
		params.Meta[wire.MetaRefuseUnknownEffects] = true
	}
	var key string
	if resendable {
		key = newIdempotencyKey()
		setKey(params, key)
		if c.journal != nil {
			// Recorded before it is sent: whatever becomes of the answer,
			// Resume can finish the call.
			rawArgs, err := json.Marshal(args)
			if err != nil {
				return nil, fmt.Errorf("calling %s: encoding the arguments: %w", name, err)
			}
			entry := JournalEntry{Target: c.target, Wire: c.wire, Tool: name, CreatedAt: time.Now().UTC(), IdempotencyKey: key, Arguments: rawArgs}
			if err := c.journal.addUnsent(entry); err != nil {
				return nil, fmt.Errorf("calling %s: not sent, the journal cannot record it: %w", name, err)
			}
		}
	}
	call, err := c.create(ctx, params, key)
	if call != nil {
		call.Fallback = fallback
	}
	return call, err
}

// create sends the tools/call params (carrying key, if not empty) and
// settles what the journal holds of it. A call with a key whose answer is
// lost is sent again with the same key, a few times; one that stays
// unanswered is an *OutcomeUnknownError.
func (c *clientImpl) create(ctx context.Context, params *mcp.CallToolParams, key string) (*Call, error) {
	name := params.Name
	tries := 1
	if key != "" {
		tries = createTries
	}
	wait := createRetryWait
	limited := 0
	var res *mcp.CallToolResult
	var err error
	for try := 1; ; try++ {
		if key != "" {
			// On a new session if the server forgot this one: the key
			// makes a second delivery harmless.
			res, err = onSession(ctx, c, func(cs *mcp.ClientSession) (*mcp.CallToolResult, error) { return cs.CallTool(ctx, params) })
		} else {
			res, err = c.session().CallTool(ctx, params)
		}
		if pause, again := rateLimited(err); again && !storeUnavailable(err) && pause <= maxPacedPause && limited < maxPacedTries && ctx.Err() == nil {
			// Refused by a rate limit before anything ran: send it
			// again after the pause the server asks for.
			limited++
			try--
			pause = max(pause, minRetryPause)
			c.log.Debug("a tools/call refused by the server's rate limit; sending it again", "tool", name, "pause", pause)
			t := time.NewTimer(pause)
			select {
			case <-ctx.Done():
				// Given up during the pause: the refusal stands, and
				// nothing is sent again.
				t.Stop()
				c.forgetUnsent(key)
				return nil, err
			case <-t.C:
			}
			continue
		}
		if err == nil || answered(err) || try >= tries || ctx.Err() != nil {
			break
		}
		c.log.Warn("the answer to a tools/call was lost; sending it again with its idempotency key", "tool", name, "try", try, "err", err)
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
		wait = min(2*wait, createRetryWaitMx)
	}
	if err != nil {
		if answered(err) {
			c.forgetUnsent(key)
			return nil, err
		}
		return nil, &OutcomeUnknownError{Tool: name, Key: key, Journaled: key != "" && c.journal != nil, Err: err}
	}
	raw, isTask := res.Meta[metaTaskHandle]
	if !isTask {
		c.forgetUnsent(key)
		return &Call{Result: res}, nil
	}
	b, err := json.Marshal(raw)
	if err != nil {
		return nil, fmt.Errorf("calling %s: %w", name, err)
	}
	st, err := parseHandle(b)
	if err != nil {
		return nil, fmt.Errorf("calling %s: %w", name, err)
	}
	c.log.Info("task created", "task", st.ID, "tool", name, "wire", c.wire)
	call := &Call{Task: st, EventSource: eventSourceOf(b)}
	if c.journal != nil {
		entry := JournalEntry{TaskID: st.ID, Target: c.target, Wire: c.wire, Tool: name, CreatedAt: st.CreatedAt}
		if entry.CreatedAt.IsZero() {
			entry.CreatedAt = time.Now().UTC()
		}
		var jerr error
		if key != "" {
			jerr = c.journal.settle(c.target, key, entry)
		} else {
			jerr = c.journal.add(entry)
		}
		if jerr != nil {
			// The task exists: hand it out with the error, so that the host
			// can still wait for it (and must not call the tool again).
			return call, fmt.Errorf("task %s of %s was created but not recorded in the journal: %w", st.ID, name, jerr)
		}
	}
	return call, nil
}

// forgetUnsent drops the journal's record of the call sent with key, which
// the server answered without a task.
func (c *clientImpl) forgetUnsent(key string) {
	if key == "" || c.journal == nil {
		return
	}
	if err := c.journal.removeUnsent(c.target, key); err != nil {
		c.log.Warn("removing an answered call from the journal", "key", key, "err", err)
	}
}

// resend finishes a call of the journal whose answer never came: it sends
// it again with its key.
func (c *clientImpl) resend(ctx context.Context, e JournalEntry) (*Call, error) {
	params := &mcp.CallToolParams{Name: e.Tool}
	if len(e.Arguments) > 0 && string(e.Arguments) != "null" {
		params.Arguments = e.Arguments
	}
	_, resendable, err := c.tw.prepareCall(ctx, params)
	if err != nil {
		return nil, err
	}
	if !resendable {
		return nil, &OutcomeUnknownError{Tool: e.Tool, Err: errors.New("the server no longer says it honours idempotency keys for this tool, so the call is not re-sent")}
	}
	setKey(params, e.IdempotencyKey)
	return c.create(ctx, params, e.IdempotencyKey)
}

// setKey puts the idempotency key into a call's _meta.
func setKey(params *mcp.CallToolParams, key string) {
	if params.Meta == nil {
		params.Meta = mcp.Meta{}
	}
	params.Meta[wire.MetaIdempotencyKey] = key
}
