package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/mcptask/mcptask/wire"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Polling bounds.
const (
	// defaultPoll is used when the server suggests no poll interval.
	defaultPoll = 500 * time.Millisecond
	// minPoll keeps a server suggesting a tiny interval from making the
	// client spin.
	minPoll = 10 * time.Millisecond
	// jitter is the relative spread of each pause (±20%), so that many
	// clients of one server do not poll in step.
	jitter = 0.2
)

// pollDelay returns the pause before the next poll for the server's latest
// suggested interval, with jitter.
func pollDelay(suggested time.Duration) time.Duration {
	d := suggested
	if d <= 0 {
		d = defaultPoll
	}
	d = time.Duration(float64(d) * (1 - jitter + 2*jitter*rand.Float64()))
	return max(d, minPoll)
}

// waiter is the state of one Wait.
type waiter struct {
	c        *clientImpl
	id       string
	opts     WaitOptions
	ctx      context.Context // the caller's
	dctx     context.Context // ctx bounded by the deadline
	last     *TaskStatus     // the last status seen
	reported *TaskStatus     // the last status given to OnStatus

	failingSince time.Time     // when the server stopped answering; zero while it answers
	lostPause    time.Duration // the next pause after an unanswered request
}

// Pauses after a request the server did not answer (doubling).
const (
	lostPauseMin = 250 * time.Millisecond
	lostPauseMax = 5 * time.Second
)

// unanswered handles a request of the wait that got no answer of the
// server's (the connection was refused or cut): while the server has been
// silent for less than WaitOptions.Unreachable, it pauses (backing off)
// and reports that the wait goes on; then it ends the wait with an
// *UnreachableError. An answered error (or a wait cut short) is not its
// business: retry is false and the caller handles err as before.
func (w *waiter) unanswered(err error) (retry bool, _ error) {
	if err == nil || !lostInTransport(err) || w.cut() != nil {
		return false, nil
	}
	now := time.Now()
	if w.failingSince.IsZero() {
		w.failingSince, w.lostPause = now, lostPauseMin
	}
	limit := w.opts.Unreachable
	if limit <= 0 {
		limit = DefaultUnreachable
	}
	if silent := now.Sub(w.failingSince); silent >= limit {
		return true, &UnreachableError{TaskID: w.id, For: silent, Err: err}
	}
	w.c.log.Warn("the server did not answer a poll; trying again", "task", w.id, "pause", w.lostPause, "err", err)
	if err := w.sleep(w.lostPause, nil); err != nil {
		return true, err
	}
	w.lostPause = min(2*w.lostPause, lostPauseMax)
	return true, nil
}

// lostInTransport reports whether err means the request got no answer at
// all (refused or cut connection, a transport that gave up), as opposed to
// an answer of the server's, garbage included.
func lostInTransport(err error) bool {
	var je *jsonrpc.Error
	if errors.As(err, &je) {
		return je.Code == codeRejected
	}
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, mcp.ErrConnectionClosed) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		// The go-sdk's streamable client answers a call whose event
		// stream ended without the response (the connection was cut
		// mid-stream, and the server's stream cannot be resumed) with this
		// error of its own, which has no type or sentinel to test for.
		strings.Contains(err.Error(), "request terminated without response")
}

// pollFailed handles a failed poll: it returns nil to poll again (after
// backing off as the server asked, or pausing after an unanswered
// request), or the error that ends the wait.
func (w *waiter) pollFailed(err error) error {
	if d, ok := rateLimited(err); ok {
		return w.backOff(d)
	}
	if retry, err := w.unanswered(err); retry {
		return err
	}
	return w.fail("polling", err)
}

// answeredNow notes that the server answers again.
func (w *waiter) answeredNow() { w.failingSince = time.Time{} }

func (c *clientImpl) wait(ctx context.Context, id string, o *WaitOptions) (*mcp.CallToolResult, error) {
	if id == "" {
		return nil, errors.New("client: Wait needs a task ID")
	}
	w := &waiter{c: c, id: id, ctx: ctx, dctx: ctx}
	if o != nil {
		w.opts = *o
	}
	if w.opts.Deadline > 0 {
		var cancel context.CancelFunc
		w.dctx, cancel = context.WithTimeout(ctx, w.opts.Deadline)
		defer cancel()
	}
	res, err := c.tw.wait(w)
	if err == nil {
		// A large result the server answered as a link: read it whole.
		res, err = c.resolveResultLink(ctx, id, res)
	}
	if ended(err) {
		c.tw.forget(id)
		if c.journal != nil {
			// The outcome matters more than the bookkeeping: a task left in
			// the journal is merely waited for again by a later Resume
			// (never called again).
			if jerr := c.journal.remove(c.target, id); jerr != nil {
				c.log.Warn("could not remove an ended task from the journal", "task", id, "journal", c.journal.path, "err", jerr)
			}
		}
	}
	return res, err
}

// ended reports whether a Wait outcome means the task is over for the
// host: it ended (result, failure, cancellation) or the server no longer
// knows it.
func ended(err error) bool {
	var te *TaskError
	return err == nil || errors.As(err, &te) || errors.Is(err, ErrCancelled) || errors.Is(err, ErrTaskNotFound)
}

// cut returns the error of a wait cut short, or nil while it may go on:
// the caller's ctx error, or ErrDeadline.
func (w *waiter) cut() error {
	if err := w.ctx.Err(); err != nil {
		return err
	}
	if w.dctx.Err() != nil {
		status := "unknown"
		if w.last != nil {
			status = w.last.Status
		}
		return fmt.Errorf("task %s still %s after %v: %w", w.id, status, w.opts.Deadline, ErrDeadline)
	}
	return nil
}

// fail returns the error for a failed request: the cut if the wait was cut
// short meanwhile, ErrTaskNotFound for the server's -32602, or err with
// context.
func (w *waiter) fail(what string, err error) error {
	if cut := w.cut(); cut != nil {
		return cut
	}
	if isNotFound(err) {
		return notFound(w.id, err)
	}
	return fmt.Errorf("task %s: %s: %w", w.id, what, err)
}

// logLast is the number of the latest line of st's log, 0 for none.
func logLast(st *TaskStatus) int64 {
	if st.Log == nil {
		return 0
	}
	return st.Log.Last
}

// seen records a new status and reports it to OnStatus when it changed.
func (w *waiter) seen(st *TaskStatus) {
	if l := w.last; l != nil {
		// Task notifications may not carry the task's place in a tree
		// (tasks/get does): keep the parent and children seen last. A
		// task's parent never changes, its children never go away.
		if st.Parent == "" {
			st.Parent = l.Parent
		}
		if st.Children == nil {
			st.Children = l.Children
		}
	}
	w.last = st
	if w.opts.OnStatus == nil {
		return
	}
	if r := w.reported; r != nil && r.Status == st.Status && r.StatusMessage == st.StatusMessage && r.LastUpdatedAt.Equal(st.LastUpdatedAt) &&
		logLast(r) == logLast(st) && slices.Equal(r.Children, st.Children) {
		return
	}
	cp := *st
	w.reported = &cp
	w.opts.OnStatus(&cp)
}

// pause sleeps for the next poll interval, or until wake fires, or until
// the wait is cut short.
func (w *waiter) pause(wake <-chan struct{}) error {
	return w.sleep(pollDelay(w.suggested()), wake)
}

// suggested is the poll interval the server suggested last, 0 if none.
func (w *waiter) suggested() time.Duration {
	if w.last != nil {
		return w.last.PollInterval
	}
	return 0
}

// sleep waits for d, or until wake fires (nil: never), or until the wait is
// cut short, which it returns.
func (w *waiter) sleep(d time.Duration, wake <-chan struct{}) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-w.dctx.Done():
		return w.cut()
	case <-t.C:
	case <-wake:
	}
	return nil
}

// The refusal of a request by a server's rate limit, as mcptask servers
// send it: JSON-RPC error -32000 with data {"reason": "rate_limited",
// "retryAfterMs": N}.
const (
	codeLimitExceeded      = wire.CodeLimitExceeded
	reasonRateLimited      = wire.ReasonRateLimited
	codeUnavailable        = wire.CodeUnavailable
	reasonStoreUnavailable = wire.ReasonStoreUnavailable
	// maxBackOff bounds a pause asked for by a server.
	maxBackOff = time.Minute
)

// rateLimited reports whether err asks the client to send the request
// again later, and how much later: a server's refusal by a rate limit, or
// its task store briefly unavailable (mcptask servers: JSON-RPC error
// -32010 with data {"reason": "store_unavailable", "retryAfterMs": N}).
func rateLimited(err error) (time.Duration, bool) {
	we, ok := rpcError(err)
	if !ok || (we.Code != codeLimitExceeded && we.Code != codeUnavailable) {
		return 0, false
	}
	var data struct {
		Reason       string `json:"reason"`
		RetryAfterMs int64  `json:"retryAfterMs"`
	}
	if json.Unmarshal(we.Data, &data) != nil {
		return 0, false
	}
	switch {
	case we.Code == codeLimitExceeded && data.Reason == reasonRateLimited,
		we.Code == codeUnavailable && data.Reason == reasonStoreUnavailable:
		return time.Duration(data.RetryAfterMs) * time.Millisecond, true
	}
	return 0, false
}

// Pacing of one-shot requests refused by a rate limit (see paced).
const (
	// minRetryPause is the shortest pause before a refused request is
	// sent again, whatever the server asked.
	minRetryPause = 20 * time.Millisecond
	// maxPacedPause is the longest pause paced makes: a server that asks
	// for more is answered with its refusal at once.
	maxPacedPause = 5 * time.Second
	// maxPacedTries bounds the sends of one request.
	maxPacedTries = 50
)

// paced runs send (one request of method) and, while the server refuses
// it by a rate limit or its store briefly unavailable (see rateLimited),
// sends it again after the pause the server asks for: a program reading
// many tasks in a row (mcptask list) is paced by the server instead of
// failing. A pause longer than maxPacedPause, too many refusals, or ctx
// done returns the refusal, with the server's words.
func (c *clientImpl) paced(ctx context.Context, method string, send func() error) error {
	for try := 1; ; try++ {
		err := send()
		pause, again := rateLimited(err)
		if !again || pause > maxPacedPause || try >= maxPacedTries {
			return err
		}
		pause = max(pause, minRetryPause)
		c.log.Debug("a request refused by the server's rate limit (or its store briefly unavailable); sending it again", "method", method, "pause", pause)
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
	}
}

// storeUnavailable reports whether err is a server's answer that its task
// store is briefly unavailable: the request did not fail for good, and
// for a create, the task may or may not exist.
func storeUnavailable(err error) bool {
	_, retry := rateLimited(err)
	we, _ := rpcError(err)
	return retry && we.Code == codeUnavailable
}

// backOff pauses after a rate-limited poll for as long as the server asked
// (at least one poll interval, at most maxBackOff), or until the wait is
// cut short.
func (w *waiter) backOff(asked time.Duration) error {
	d := min(max(asked, pollDelay(w.suggested())), maxBackOff)
	w.c.log.Debug("the server asked to send the request again later (a rate limit, or its store briefly unavailable); backing off", "task", w.id, "pause", d)
	return w.sleep(d, nil)
}

func (c *clientImpl) pending() ([]JournalEntry, error) {
	if c.journal == nil {
		return nil, fmt.Errorf("client: no journal configured (Options.Journal): %w", ErrUnsupported)
	}
	return c.journal.pending(c.target)
}

func (c *clientImpl) resume(ctx context.Context, o *WaitOptions) ([]Outcome, error) {
	entries, err := c.pending()
	if err != nil {
		return nil, err
	}
	if o != nil && o.OnStatus != nil {
		// The tasks are waited for concurrently; OnStatus is called by one
		// at a time.
		cp := *o
		var mu sync.Mutex
		onStatus := o.OnStatus // not o.OnStatus inside: o is replaced below
		cp.OnStatus = func(st *TaskStatus) {
			mu.Lock()
			defer mu.Unlock()
			onStatus(st)
		}
		o = &cp
	}
	out := make([]Outcome, len(entries))
	var wg sync.WaitGroup
	for i, e := range entries {
		out[i].Entry = e
		wg.Go(func() {
			id := e.TaskID
			if e.Unsent() {
				// The answer to this call never came: send it again with
				// its key, which gives the task the server created (if it
				// did) instead of a second run.
				c.log.Info("re-sending a call whose answer was lost", "tool", e.Tool, "key", e.IdempotencyKey, "createdAt", e.CreatedAt)
				call, err := c.resend(ctx, e)
				switch {
				case err != nil:
					out[i].Err = err
					return
				case call.Task == nil:
					out[i].Result = call.Result
					return
				}
				id = call.Task.ID
				out[i].Entry.TaskID = id
			}
			c.log.Info("resuming a task", "task", id, "tool", e.Tool, "createdAt", e.CreatedAt)
			out[i].Result, out[i].Err = c.wait(ctx, id, o)
		})
	}
	wg.Wait()
	return out, nil
}

// What ended an awaitPush.
type pushEvent int

const (
	pushNote   pushEvent = iota // a notification may be waiting
	pushDown                    // the notifications' path went down or changed, or the client was closed
	pushSafety                  // the safety poll is due
	pushWake                    // the caller's wake channel fired
)

// awaitPush waits, while the task's notifications flow, for the next one
// (ready), a change of their path (down), wake (nil: never) or the safety
// poll, and says which came first; or it returns the cut of a wait cut
// short.
func (w *waiter) awaitPush(ready, down, wake <-chan struct{}) (pushEvent, error) {
	t := time.NewTimer(safetyPoll(w.suggested()))
	defer t.Stop()
	select {
	case <-ready:
		return pushNote, nil
	case <-down:
		return pushDown, nil
	case <-w.c.closing:
		return pushDown, nil // the client was closed: no more notifications
	case <-wake:
		return pushWake, nil
	case <-t.C:
		return pushSafety, nil
	case <-w.dctx.Done():
		return 0, w.cut()
	}
}

// stale reports whether a notification's state is older than the state
// the wait already has (a poll's answer overtook it).
func (w *waiter) stale(st *TaskStatus) bool {
	return w.last != nil && st.LastUpdatedAt.Before(w.last.LastUpdatedAt)
}

// closed reports whether ch is closed.
func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
