package engine

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/mcptask/mcptask/audit"
	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/task"
)

// The defaults of the task log options (see [Options]).
const (
	// DefaultLogFlushInterval is how long a logged line waits in memory,
	// at most, before it is written to the store with the lines logged
	// meanwhile.
	DefaultLogFlushInterval = 200 * time.Millisecond
	// DefaultLogFlushLines is how many waiting lines start a write at
	// once.
	DefaultLogFlushLines = 256
	// DefaultLogWriteTimeout bounds each write of logged lines.
	DefaultLogWriteTimeout = 5 * time.Second
)

// ErrNoLogs is returned by ReadLog when the engine's store keeps no task
// logs (it is not a store.TaskLogs).
var ErrNoLogs = errors.New("engine: the task store keeps no task logs")

// taskLogs returns the store's task logs, or nil.
func (e *Engine) taskLogs() store.TaskLogs {
	l, _ := e.store.(store.TaskLogs)
	return l
}

// HasLogs reports whether the engine's store keeps task logs.
func (e *Engine) HasLogs() bool { return e.taskLogs() != nil }

// LogLimits returns the caps of each task's log (Options.LogLimits with
// the defaults filled in).
func (e *Engine) LogLimits() store.LogLimits { return e.opts.LogLimits.WithDefaults() }

// ReadLog returns a page of the log of the task id, after the sequence
// number after (0: from the oldest line kept), if owner may see the
// task: another owner's task, an expired or an unknown one is a
// *NotFoundError, exactly as for Get. It returns the task as read too.
// limit is bounded to store.MaxLogReadLines; limit <= 0 reads the log's
// position only. ErrNoLogs when the store keeps no logs.
func (e *Engine) ReadLog(ctx context.Context, owner task.Owner, id task.ID, after int64, limit int) (*store.LogPage, *task.Task, error) {
	l := e.taskLogs()
	if l == nil {
		return nil, nil, ErrNoLogs
	}
	t, err := e.visible(ctx, owner, id)
	if err != nil {
		return nil, nil, err
	}
	p, err := l.ReadLog(ctx, id, after, limit)
	if errors.Is(err, store.ErrNotFound) { // deleted meanwhile
		return nil, nil, &NotFoundError{Reason: audit.ReasonUnknown}
	}
	if err != nil {
		return nil, nil, err
	}
	return p, t, nil
}

// LogPosition returns the position of the log of the task id (a page
// without lines: Last, Dropped), nil when the store keeps no logs. The
// caller has checked that the requester may see the task.
func (e *Engine) LogPosition(ctx context.Context, id task.ID) (*store.LogPage, error) {
	l := e.taskLogs()
	if l == nil {
		return nil, nil
	}
	return l.ReadLog(ctx, id, 0, 0)
}

// Log appends text to the task's log (see store.TaskLogs), one line per
// line of text, under the name stream ("stdout", "stderr", or "log" for
// what the work says itself). It never blocks on the store: lines wait in
// memory and are written together, at most Options.LogFlushInterval
// after they were logged (or at once when Options.LogFlushLines wait),
// and when the work returns, before its outcome is recorded; the lines
// that overflow the memory kept for them (the log's caps) are dropped,
// oldest first, and counted as dropped in the log. It does nothing when
// the store keeps no logs.
func (h *Handle) Log(stream, text string) {
	b := h.run.logs
	if b == nil {
		return
	}
	now := h.e.now()
	text = strings.TrimRight(text, "\r\n")
	for line := range strings.SplitSeq(text, "\n") {
		b.add(store.LogLine{Time: now, Stream: stream, Text: strings.TrimSuffix(line, "\r")})
	}
}

// FlushLog writes the lines the work logged that still wait in memory,
// before it returns (the engine does it when the work returns).
func (h *Handle) FlushLog() {
	if h.run.logs != nil {
		h.run.logs.flush()
	}
}

// HasLog reports whether the task's lines are kept (the store keeps task
// logs).
func (h *Handle) HasLog() bool { return h.run.logs != nil }

// newLogBuffer returns the log buffer of a run of task id, nil when the
// store keeps no logs.
func (e *Engine) newLogBuffer(id task.ID) *logBuffer {
	l := e.taskLogs()
	if l == nil {
		return nil
	}
	return &logBuffer{e: e, l: l, id: id, lim: e.LogLimits()}
}

// logBuffer holds the lines a run logged until they are written: one
// write per flush, at most one write at a time, in order.
type logBuffer struct {
	e   *Engine
	l   store.TaskLogs
	id  task.ID
	lim store.LogLimits

	mu      sync.Mutex
	pending []store.LogLine
	bytes   int   // of pending's texts
	skipped int64 // lines dropped before the next flush's lines
	timer   *time.Timer
	kicked  bool // a flush was started and has not taken pending yet

	writeMu sync.Mutex
}

func (b *logBuffer) add(l store.LogLine) {
	l.Text = store.CutLine(l.Text, b.lim.MaxLineBytes)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.pending = append(b.pending, l)
	b.bytes += len(l.Text)
	drop := 0
	for len(b.pending)-drop > b.lim.MaxLines || (b.bytes > b.lim.MaxBytes && drop < len(b.pending)-1) {
		b.bytes -= len(b.pending[drop].Text)
		drop++
	}
	if drop > 0 {
		b.pending = append(b.pending[:0], b.pending[drop:]...)
		b.skipped += int64(drop)
	}
	switch {
	case b.kicked:
	case len(b.pending) >= b.e.opts.LogFlushLines:
		if b.timer != nil {
			b.timer.Stop()
			b.timer = nil
		}
		b.kicked = true
		go b.flush()
	case b.timer == nil:
		b.timer = time.AfterFunc(b.e.opts.LogFlushInterval, b.flush)
	}
}

// flush writes the waiting lines. A failed write counts them as dropped
// (the log says how many it missed) and tries again later, unless the
// task is gone.
func (b *logBuffer) flush() {
	b.writeMu.Lock()
	defer b.writeMu.Unlock()
	b.mu.Lock()
	lines, skipped := b.pending, b.skipped
	b.pending, b.bytes, b.skipped, b.kicked = nil, 0, 0, false
	if b.timer != nil {
		b.timer.Stop()
		b.timer = nil
	}
	b.mu.Unlock()
	if len(lines) == 0 && skipped == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), b.e.opts.LogWriteTimeout)
	defer cancel()
	err := b.l.AppendLog(ctx, b.id, store.LogBatch{Lines: lines, Skipped: skipped, Limits: b.lim})
	if err == nil || errors.Is(err, store.ErrNotFound) {
		return
	}
	b.e.log.Warn("writing a task's log lines failed; they are counted as dropped", "task", b.id, "lines", len(lines), "err", err)
	b.mu.Lock()
	defer b.mu.Unlock()
	b.skipped += skipped + int64(len(lines))
	if b.timer == nil && !b.kicked {
		b.timer = time.AfterFunc(b.e.opts.LogFlushInterval, b.flush)
	}
}
