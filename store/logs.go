package store

import (
	"context"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/mcptask/mcptask/task"
)

// TaskLogs is the facet of [Store] by which stores keep a bounded log per task: the
// lines a running task's work appends (a command's output, an upstream's
// logging notifications), for its owner to read while the task runs and
// after it ended. A task's log belongs to the task: deleting the task
// (Delete, DeleteExpired) deletes its log in the same transaction.
//
// Each line gets a sequence number, 1 for the first line ever appended to
// the task's log and one more for each line after, whatever was dropped
// since: a reader continues after the last number it read, and learns
// from the gap how many lines it missed. The log is capped (see
// [LogLimits]): when an append takes it above a cap, its oldest lines
// are dropped first, and counted.
type TaskLogs interface {
	// AppendLog durably appends b's lines to the log of the task id, in
	// order, dropping the oldest lines of the log (b's own included)
	// until it fits b.Limits. It returns ErrNotFound for an unknown task.
	// A line longer than b.Limits.MaxLineBytes is cut there (at a UTF-8
	// boundary). An append is atomic: its lines are all kept (until a
	// later append drops them) or none.
	AppendLog(ctx context.Context, id task.ID, b LogBatch) error

	// ReadLog returns up to limit lines of the log of the task id whose
	// sequence number is above after (0: from the oldest line kept), in
	// order; limit <= 0 returns no line, only the log's position. It
	// returns ErrNotFound for an unknown task; a task with no log has an
	// empty one.
	ReadLog(ctx context.Context, id task.ID, after int64, limit int) (*LogPage, error)
}

// LogLine is one line of a task's log.
type LogLine struct {
	// Seq is the line's sequence number in its task's log, set by the
	// store (ignored by AppendLog).
	Seq int64
	// Time is when the line was written; the zero time means the time of
	// the append. It is kept to the millisecond.
	Time time.Time
	// Stream names where the line came from ("stdout", "stderr", "log"
	// for what the work wrote itself, a logger's name); it may be empty.
	Stream string
	// Text is the line, without its line ending.
	Text string
}

// LogBatch is one AppendLog: lines and the caps to keep the log within.
type LogBatch struct {
	// Lines are appended in order.
	Lines []LogLine
	// Skipped counts lines the writer dropped before they reached the
	// store (a buffer that overflowed, a failed write): they take the
	// sequence numbers before Lines', and count as dropped.
	Skipped int64
	// Limits caps the log; zero fields mean their defaults.
	Limits LogLimits
	// Publish names the streams whose lines are also appended as output
	// events (see [Events]), in the same transaction; "*" names every
	// stream.
	Publish []string
	// Events are output events appended in the same transaction, after
	// the lines (the values the work emitted meanwhile).
	Events []OutputEvent
}

// Publishes reports whether b publishes the lines of stream.
func (b LogBatch) Publishes(stream string) bool {
	for _, p := range b.Publish {
		if p == "*" || p == stream {
			return true
		}
	}
	return false
}

// LogPage is what ReadLog returns.
type LogPage struct {
	// Lines are the lines read, in order.
	Lines []LogLine
	// Next is the cursor to continue after this page: the sequence
	// number of its last line, else the larger of the cursor given and
	// the number of the last line dropped (so that a reader never asks
	// for lines that are gone again).
	Next int64
	// Last is the sequence number of the latest line appended, 0 when
	// the log is empty.
	Last int64
	// Missed is how many lines between the cursor given and the first
	// line returned were dropped before they were read.
	Missed int64
	// Dropped is how many lines the log has dropped in all, to stay
	// within its caps (or that never reached the store).
	Dropped int64
	// More reports whether the log holds lines after this page.
	More bool
}

// LogLimits caps a task's log. Zero fields mean the defaults below.
type LogLimits struct {
	// MaxLines caps the lines kept. Default DefaultLogMaxLines.
	MaxLines int
	// MaxBytes caps the bytes of text kept. Default DefaultLogMaxBytes.
	MaxBytes int
	// MaxLineBytes caps one line's text; a longer line is cut. Default
	// DefaultLogMaxLineBytes.
	MaxLineBytes int
}

// The default caps of a task's log, and of one read.
const (
	// DefaultLogMaxLines is the default cap on the lines of a task's log.
	DefaultLogMaxLines = 10000
	// DefaultLogMaxBytes is the default cap on the text of a task's log.
	DefaultLogMaxBytes = 1 << 20
	// DefaultLogMaxLineBytes is the default cap on one line's text.
	DefaultLogMaxLineBytes = 4096
	// MaxLogReadLines caps the lines one ReadLog returns.
	MaxLogReadLines = 1000
)

// WithDefaults returns l with its zero (or negative) fields set to the
// defaults, and MaxLineBytes no larger than MaxBytes.
func (l LogLimits) WithDefaults() LogLimits {
	if l.MaxLines <= 0 {
		l.MaxLines = DefaultLogMaxLines
	}
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultLogMaxBytes
	}
	if l.MaxLineBytes <= 0 {
		l.MaxLineBytes = DefaultLogMaxLineBytes
	}
	l.MaxLineBytes = min(l.MaxLineBytes, l.MaxBytes)
	return l
}

// CutLine returns s cut to at most n bytes, at a UTF-8 boundary, with
// invalid UTF-8 and NUL bytes (which PostgreSQL's text refuses) replaced
// by U+FFFD: what a store keeps of a line.
func CutLine(s string, n int) string {
	if !utf8.ValidString(s) {
		s = toValidUTF8(s)
	}
	if strings.IndexByte(s, 0) >= 0 {
		s = strings.ReplaceAll(s, "\x00", "\uFFFD")
	}
	if len(s) <= n {
		return s
	}
	i := n
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i]
}

func toValidUTF8(s string) string {
	b := make([]byte, 0, len(s))
	for len(s) > 0 {
		r, size := utf8.DecodeRuneInString(s)
		if r == utf8.RuneError && size == 1 {
			b = utf8.AppendRune(b, utf8.RuneError)
		} else {
			b = append(b, s[:size]...)
		}
		s = s[size:]
	}
	return string(b)
}

// PlanAppend is the part of an AppendLog that backends share: it cuts b's
// lines to the line cap, stamps them (zero times become now, kept to the
// millisecond) and numbers them after last (the log's latest sequence
// number), dropping at once those of b's own lines that the line cap
// would drop anyway. It returns the lines to insert and how many of b's
// lines (Skipped included) it dropped.
func PlanAppend(b LogBatch, last int64, now time.Time) (lines []LogLine, dropped int64) {
	lim := b.Limits.WithDefaults()
	seq := last + max(b.Skipped, 0)
	dropped = max(b.Skipped, 0)
	lines = make([]LogLine, 0, len(b.Lines))
	for _, l := range b.Lines {
		seq++
		l.Seq = seq
		l.Text = CutLine(l.Text, lim.MaxLineBytes)
		l.Stream = CutLine(l.Stream, 64)
		if l.Time.IsZero() {
			l.Time = now
		}
		l.Time = time.UnixMilli(l.Time.UnixMilli()).UTC()
		lines = append(lines, l)
	}
	if n := len(lines) - lim.MaxLines; n > 0 {
		dropped += int64(n)
		lines = lines[n:]
	}
	return lines, dropped
}

// LogReadLimit returns limit bounded to [0, MaxLogReadLines].
func LogReadLimit(limit int) int {
	return min(max(limit, 0), MaxLogReadLines)
}

// LogPageOf builds the page of a ReadLog from the lines read after the
// cursor after (up to limit+1 of them, in order: one more than the page
// tells there are more), the log's latest sequence number last and its
// count of dropped lines: what backends share.
func LogPageOf(lines []LogLine, after int64, limit int, last, dropped int64) *LogPage {
	p := &LogPage{Next: after, Last: last, Dropped: dropped}
	if limit <= 0 {
		p.More = after < last
		return p
	}
	if len(lines) > limit {
		lines, p.More = lines[:limit], true
	}
	p.Lines = lines
	switch {
	case len(lines) > 0:
		p.Missed = lines[0].Seq - after - 1
		p.Next = lines[len(lines)-1].Seq
	case after < last:
		// Everything after the cursor was dropped.
		p.Missed, p.Next = last-after, last
	}
	return p
}
