package engine

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/mcptask/mcptask/audit"
	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/task"
)

// maxLogBackoff bounds the wait between the writes of a log whose lines
// overflow its caps in memory (see logBuffer.backoff).
const maxLogBackoff = 2 * time.Second

// logLimits returns the caps of each task's log (Options.LogLimits with
// the defaults filled in).
func (e *Engine) logLimits() store.LogLimits { return e.opts.LogLimits.WithDefaults() }

// ReadLog returns a page of the log of the task id, after the sequence
// number after (0: from the oldest line kept), if owner may see the
// task: another owner's task, an expired or an unknown one is a
// *NotFoundError, exactly as for Get. It returns the task as read too.
// limit is bounded to store.MaxLogReadLines; limit <= 0 reads the log's
// position only.
func (e *Engine) ReadLog(ctx context.Context, owner task.Owner, id task.ID, after int64, limit int) (*store.LogPage, *task.Task, error) {
	l := e.store
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
// without lines: Last, Dropped). The caller has checked that the requester may see the task.
func (e *Engine) LogPosition(ctx context.Context, id task.ID) (*store.LogPage, error) {
	l := e.store
	return l.ReadLog(ctx, id, 0, 0)
}

// Log appends text to the task's log (see store.TaskLogs), one line per
// line of text, under the name stream ("stdout", "stderr", or "log" for
// what the work says itself). It never blocks on the store: lines wait in
// memory and are written together, Options.LogFlushInterval after the
// first of them (sooner, though not more than four times per interval,
// when Options.LogFlushLines wait), and when the work returns, before its
// outcome is recorded, or asks for input. At most 4 x LogFlushLines lines
// and 256 KiB wait (within the log's caps): a program that writes faster
// has the oldest waiting lines dropped, and counted as dropped in the
// log, and is written less often (up to every 2 s) while it does.
func (h *Handle) Log(stream, text string) {
	b := h.run.logs
	if b == nil {
		return
	}
	now := h.e.now()
	text = strings.TrimRight(text, "\r\n")
	for line := range strings.SplitSeq(text, "\n") {
		addLine(b, now, stream, strings.TrimSuffix(line, "\r"))
	}
}

// LogLine appends one line (without its line ending) to the task's log,
// as Log does, without allocating for it: for a program's output, read
// line by line into a reused buffer.
func (h *Handle) LogLine(stream string, line []byte) {
	if b := h.run.logs; b != nil {
		addLine(b, h.e.now(), stream, line)
	}
}

// FlushLog writes the lines the work logged that still wait in memory,
// before it returns (the engine does it when the work returns).
func (h *Handle) FlushLog() {
	if h.run.logs != nil {
		h.run.logs.flush()
	}
}

// newLogBuffer returns the log buffer of a run of task id, of tool.
func (e *Engine) newLogBuffer(id task.ID, tool string) *logBuffer {
	l := e.store
	lim := e.logLimits()
	// What waits in memory is bounded tighter than the log: a program
	// writing faster than that per flush has the lines in between
	// dropped (and counted), not a growing buffer and ever larger
	// writes.
	mem := store.LogLimits{MaxLines: min(lim.MaxLines, maxLogBufferFlushes*e.opts.LogFlushLines),
		MaxBytes: min(lim.MaxBytes, maxLogBufferBytes), MaxLineBytes: lim.MaxLineBytes}
	mem.MaxLineBytes = min(mem.MaxLineBytes, mem.MaxBytes)
	var publish []string
	if e.hooks.PublishLog != nil {
		publish = e.hooks.PublishLog(tool)
	}
	return &logBuffer{e: e, l: l, id: id, lim: lim, mem: mem, publish: publish}
}

// The bounds of the lines that wait in memory for a write, per task: at
// most maxLogBufferFlushes times Options.LogFlushLines lines (1024 by
// default) and maxLogBufferBytes bytes, and never more than the log's
// own caps.
const (
	maxLogBufferFlushes = 4
	maxLogBufferBytes   = 256 << 10
)

// logBuffer holds the lines a run logged until they are written: their
// texts one after the other in one growing byte slice (no allocation per
// line), the oldest dropped first beyond the log's caps; one write per
// flush, at most one write at a time, in order.
type logBuffer struct {
	e   *Engine
	run *run // whose task may not be created yet (see run.ensureCreated)
	l   store.TaskLogs
	id  task.ID
	lim store.LogLimits // the log's caps, for the store
	mem store.LogLimits // what may wait in memory
	// publish names the streams whose lines are output events too.
	publish []string
	// events are the values the work emitted (Handle.Emit) that wait
	// for the next write, with the lines.
	events []store.OutputEvent

	mu      sync.Mutex
	text    []byte        // the texts of lines[head:], from text[lines[head].off]
	lines   []pendingLine // waiting from lines[head]
	head    int
	bytes   int   // of the waiting lines' texts
	skipped int64 // lines dropped before the next flush's lines
	timer   *time.Timer
	kicked  bool      // a flush was started and has not taken the lines yet
	last    time.Time // when the last flush took the lines
	// backoff is the wait after a flush whose lines overflowed the caps
	// in memory: a program that writes faster than the log can keep is
	// written less and less often (up to maxLogBackoff), its log then
	// showing the latest lines of each write; zero when none overflowed.
	backoff time.Duration

	writeMu sync.Mutex
	// ended is set once the run's work returned and its lines were
	// written: a failed write is then not tried again (the store may be
	// closing).
	ended atomic.Bool
}

// pendingLine is a line waiting in a logBuffer: its text is
// text[off:off+n].
type pendingLine struct {
	at     time.Time
	stream string
	off, n int
}

// addLine adds one line to b, cut to the line cap at a UTF-8 boundary.
func addLine[T string | []byte](b *logBuffer, at time.Time, stream string, line T) {
	if n := b.mem.MaxLineBytes; len(line) > n {
		for n > 0 && !utf8.RuneStart(line[n]) {
			n--
		}
		line = line[:n]
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.lines = append(b.lines, pendingLine{at: at, stream: stream, off: len(b.text), n: len(line)})
	b.text = append(b.text, line...)
	b.bytes += len(line)
	for b.head < len(b.lines)-1 && (len(b.lines)-b.head > b.mem.MaxLines || b.bytes > b.mem.MaxBytes) {
		b.bytes -= b.lines[b.head].n
		b.head++
		b.skipped++
	}
	if b.head >= 256 && b.head*2 >= len(b.lines) {
		b.compact()
	}
	b.schedule()
}

// compact drops the dropped lines' room. Called with b.mu held.
func (b *logBuffer) compact() {
	base := b.lines[b.head].off
	n := copy(b.lines, b.lines[b.head:])
	b.lines = b.lines[:n]
	for i := range b.lines {
		b.lines[i].off -= base
	}
	b.text = b.text[:copy(b.text, b.text[base:])]
	b.head = 0
}

// schedule starts or plans the next flush. Called with b.mu held.
func (b *logBuffer) schedule() {
	if b.kicked {
		return
	}
	wait := max(b.e.opts.LogFlushInterval, b.backoff)
	if b.backoff == 0 && b.skipped == 0 && len(b.lines)-b.head >= b.e.opts.LogFlushLines {
		// Many lines wait: sooner, but not more than four times per
		// interval, however fast they come.
		wait = max(0, time.Until(b.last.Add(b.e.opts.LogFlushInterval/4)))
		if b.timer != nil {
			b.timer.Stop()
			b.timer = nil
		}
	}
	if b.timer == nil {
		b.kicked = wait == 0
		if b.kicked {
			go b.flush()
		} else {
			b.timer = time.AfterFunc(wait, b.flush)
		}
	}
}

// take returns the waiting lines as a batch, and empties b. The texts
// share one allocation.
func (b *logBuffer) take() store.LogBatch {
	b.mu.Lock()
	defer b.mu.Unlock()
	batch := store.LogBatch{Skipped: b.skipped, Limits: b.lim, Publish: b.publish, Events: b.events}
	b.events = nil
	if n := len(b.lines) - b.head; n > 0 {
		base := b.lines[b.head].off
		all := string(b.text[base:])
		batch.Lines = make([]store.LogLine, 0, n)
		for _, l := range b.lines[b.head:] {
			off := l.off - base
			batch.Lines = append(batch.Lines, store.LogLine{Time: l.at, Stream: l.stream, Text: all[off : off+l.n]})
		}
	}
	if b.skipped > 0 {
		b.backoff = min(max(2*b.backoff, b.e.opts.LogFlushInterval), maxLogBackoff)
	} else {
		b.backoff = 0
	}
	b.text, b.lines, b.head, b.bytes, b.skipped = b.text[:0], b.lines[:0], 0, 0, 0
	b.kicked, b.last = false, time.Now()
	if b.timer != nil {
		b.timer.Stop()
		b.timer = nil
	}
	return batch
}

// flush writes the waiting lines. A failed write counts them as dropped
// (the log says how many it missed) and tries again later, unless the
// task is gone.
func (b *logBuffer) flush() {
	b.writeMu.Lock()
	defer b.writeMu.Unlock()
	batch := b.take()
	if len(batch.Lines) == 0 && batch.Skipped == 0 && len(batch.Events) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), b.e.opts.LogWriteTimeout)
	defer cancel()
	if b.run != nil {
		if err := b.run.ensureCreated(context.Background()); err != nil {
			return // the task was never created: nothing to log to
		}
	}
	err := b.l.AppendLog(ctx, b.id, batch)
	if err == nil {
		b.e.wakeWatchers(b.id) // a waiter here may follow the log
		return
	}
	if errors.Is(err, store.ErrNotFound) {
		return
	}
	b.e.log.Warn("writing a task's log lines failed; they are counted as dropped", "task", b.id, "lines", len(batch.Lines), "err", err)
	if b.ended.Load() {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.skipped += batch.Skipped + int64(len(batch.Lines))
	// Emitted values are never dropped: they wait for the next write.
	b.events = append(batch.Events, b.events...)
	b.schedule()
}

// maxPendingEvents is how many emitted values may wait in memory: one
// more writes them first.
const maxPendingEvents = 64

// addEvent queues an emitted value for the next write; it writes the
// waiting ones first when too many wait.
func (b *logBuffer) addEvent(ev store.OutputEvent) {
	b.mu.Lock()
	full := len(b.events) >= maxPendingEvents
	b.mu.Unlock()
	if full {
		b.flush()
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.events = append(b.events, ev)
	b.schedule()
}

// end writes the waiting lines, the run's work having returned; later
// failures are not tried again.
func (b *logBuffer) end() {
	b.flush()
	b.ended.Store(true)
}
