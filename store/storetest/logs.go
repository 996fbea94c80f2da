package storetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/task"
)

// runLog checks the task logs ([store.TaskLogs]): appends are numbered
// and read back in order from a cursor; the caps drop the oldest lines
// first and count them, and a reader whose cursor fell behind learns how
// many it missed; long lines are cut; an unknown task is ErrNotFound;
// the log goes with its task (deletion, expiry); a second store on the
// same tasks reads what the first appended.
func (s *suite) runLog(t *testing.T) {
	run(t, []testCase{
		{"AppendRead", s.logAppendRead},
		{"Cursor", s.logCursor},
		{"CapLines", s.logCapLines},
		{"CapBytes", s.logCapBytes},
		{"CapBytesManyLines", s.logCapBytesManyLines},
		{"LongLine", s.logLongLine},
		{"Skipped", s.logSkipped},
		{"UnknownTask", s.logUnknownTask},
		{"GoesWithTask", s.logGoesWithTask},
		{"Shared", s.logShared},
	})
}

// logs returns a new store that must be a store.TaskLogs, or skips.
func (s *suite) logs(t *testing.T) (store.Store, store.TaskLogs) {
	t.Helper()
	st := s.store(t)
	l := st
	return st, l
}

// logTask creates a working task and returns its ID.
func logTask(t *testing.T, st store.Store) task.ID {
	t.Helper()
	tk := newTask("alice", base)
	mustCreate(t, st, tk)
	return tk.ID
}

// textLines returns lines with the texts given, on stream "stdout".
func textLines(texts ...string) []store.LogLine {
	lines := make([]store.LogLine, len(texts))
	for i, s := range texts {
		lines[i] = store.LogLine{Stream: "stdout", Text: s, Time: base.Add(time.Duration(i) * time.Second)}
	}
	return lines
}

// numbered returns the texts "prefix1".."prefixN".
func numbered(prefix string, from, to int) []string {
	var out []string
	for i := from; i <= to; i++ {
		out = append(out, fmt.Sprintf("%s%d", prefix, i))
	}
	return out
}

func mustAppend(t *testing.T, l store.TaskLogs, id task.ID, b store.LogBatch) {
	t.Helper()
	if err := l.AppendLog(context.Background(), id, b); err != nil {
		t.Fatalf("AppendLog: %v", err)
	}
}

func mustRead(t *testing.T, l store.TaskLogs, id task.ID, after int64, limit int) *store.LogPage {
	t.Helper()
	p, err := l.ReadLog(context.Background(), id, after, limit)
	if err != nil {
		t.Fatalf("ReadLog(%d, %d): %v", after, limit, err)
	}
	return p
}

// pageText is the page's lines as "seq:text" joined by spaces.
func pageText(p *store.LogPage) string {
	var b []string
	for _, l := range p.Lines {
		b = append(b, fmt.Sprintf("%d:%s", l.Seq, l.Text))
	}
	return strings.Join(b, " ")
}

func checkPage(t *testing.T, what string, p *store.LogPage, lines string, next, last, missed, dropped int64, more bool) {
	t.Helper()
	if got := pageText(p); got != lines || p.Next != next || p.Last != last || p.Missed != missed || p.Dropped != dropped || p.More != more {
		t.Errorf("%s: got lines %q next %d last %d missed %d dropped %d more %v;\n want lines %q next %d last %d missed %d dropped %d more %v",
			what, got, p.Next, p.Last, p.Missed, p.Dropped, p.More, lines, next, last, missed, dropped, more)
	}
}

func (s *suite) logAppendRead(t *testing.T) {
	st, l := s.logs(t)
	id := logTask(t, st)
	checkPage(t, "empty log", mustRead(t, l, id, 0, 10), "", 0, 0, 0, 0, false)
	mustAppend(t, l, id, store.LogBatch{Lines: textLines("one", "two")})
	mustAppend(t, l, id, store.LogBatch{Lines: []store.LogLine{{Stream: "stderr", Text: "three — «ü»"}}})
	p := mustRead(t, l, id, 0, 10)
	checkPage(t, "all", p, "1:one 2:two 3:three — «ü»", 3, 3, 0, 0, false)
	if got := p.Lines[0]; got.Stream != "stdout" || !got.Time.Equal(ms(base)) {
		t.Errorf("line 1: stream %q time %v, want stdout %v", got.Stream, got.Time, ms(base))
	}
	if got := p.Lines[2]; got.Stream != "stderr" || got.Time.IsZero() {
		t.Errorf("line 3: stream %q time %v, want stderr and the time of the append", got.Stream, got.Time)
	}
	checkPage(t, "position only", mustRead(t, l, id, 1, 0), "", 1, 3, 0, 0, true)
}

func (s *suite) logCursor(t *testing.T) {
	st, l := s.logs(t)
	id := logTask(t, st)
	mustAppend(t, l, id, store.LogBatch{Lines: textLines(numbered("l", 1, 5)...)})
	p := mustRead(t, l, id, 0, 2)
	checkPage(t, "page 1", p, "1:l1 2:l2", 2, 5, 0, 0, true)
	p = mustRead(t, l, id, p.Next, 2)
	checkPage(t, "page 2", p, "3:l3 4:l4", 4, 5, 0, 0, true)
	p = mustRead(t, l, id, p.Next, 2)
	checkPage(t, "page 3", p, "5:l5", 5, 5, 0, 0, false)
	p = mustRead(t, l, id, p.Next, 2)
	checkPage(t, "drained", p, "", 5, 5, 0, 0, false)
	mustAppend(t, l, id, store.LogBatch{Lines: textLines("l6")})
	checkPage(t, "continued", mustRead(t, l, id, p.Next, 2), "6:l6", 6, 6, 0, 0, false)
}

func (s *suite) logCapLines(t *testing.T) {
	st, l := s.logs(t)
	id := logTask(t, st)
	lim := store.LogLimits{MaxLines: 3}
	mustAppend(t, l, id, store.LogBatch{Lines: textLines("a1", "a2"), Limits: lim})
	reader := mustRead(t, l, id, 0, 1) // a reader that read a1
	mustAppend(t, l, id, store.LogBatch{Lines: textLines("b3", "b4"), Limits: lim})
	checkPage(t, "after one trim", mustRead(t, l, id, 0, 10), "2:a2 3:b3 4:b4", 4, 4, 1, 1, false)
	// One batch larger than the cap: only its last lines are kept.
	mustAppend(t, l, id, store.LogBatch{Lines: textLines(numbered("c", 5, 9)...), Limits: lim})
	checkPage(t, "batch over the cap", mustRead(t, l, id, 0, 10), "7:c7 8:c8 9:c9", 9, 9, 6, 6, false)
	checkPage(t, "the reader behind", mustRead(t, l, id, reader.Next, 10), "7:c7 8:c8 9:c9", 9, 9, 5, 6, false)
	checkPage(t, "a reader within", mustRead(t, l, id, 7, 10), "8:c8 9:c9", 9, 9, 0, 6, false)
}

func (s *suite) logCapBytes(t *testing.T) {
	st, l := s.logs(t)
	id := logTask(t, st)
	lim := store.LogLimits{MaxBytes: 10}
	mustAppend(t, l, id, store.LogBatch{Lines: textLines("aaaa", "bbbb"), Limits: lim}) // 8 bytes
	mustAppend(t, l, id, store.LogBatch{Lines: textLines("cccc"), Limits: lim})         // 12: drop aaaa
	checkPage(t, "bytes trimmed", mustRead(t, l, id, 0, 10), "2:bbbb 3:cccc", 3, 3, 1, 1, false)
	mustAppend(t, l, id, store.LogBatch{Lines: textLines("dddddddddd"), Limits: lim}) // 10 alone
	checkPage(t, "one line fills the cap", mustRead(t, l, id, 0, 10), "4:dddddddddd", 4, 4, 3, 3, false)
}

// logCapBytesManyLines: one long line pushes out many short ones at once.
func (s *suite) logCapBytesManyLines(t *testing.T) {
	st, l := s.logs(t)
	id := logTask(t, st)
	lim := store.LogLimits{MaxBytes: 1000}
	short := make([]string, 600)
	for i := range short {
		short[i] = "a"
	}
	mustAppend(t, l, id, store.LogBatch{Lines: textLines(short...), Limits: lim})
	mustAppend(t, l, id, store.LogBatch{Lines: textLines(strings.Repeat("b", 1000)), Limits: lim})
	p := mustRead(t, l, id, 0, 10)
	if len(p.Lines) != 1 || p.Lines[0].Seq != 601 || len(p.Lines[0].Text) != 1000 || p.Dropped != 600 || p.Missed != 600 {
		t.Errorf("after the long line: lines %.80q, dropped %d, missed %d; want line 601 alone, 600 dropped",
			pageText(p), p.Dropped, p.Missed)
	}
}

func (s *suite) logLongLine(t *testing.T) {
	st, l := s.logs(t)
	id := logTask(t, st)
	lim := store.LogLimits{MaxLineBytes: 5}
	mustAppend(t, l, id, store.LogBatch{Lines: textLines("abcdefgh", "abcé", "x\x00y"), Limits: lim})
	checkPage(t, "cut", mustRead(t, l, id, 0, 10), "1:abcde 2:abcé 3:x\uFFFDy", 3, 3, 0, 0, false)
	mustAppend(t, l, id, store.LogBatch{Lines: textLines("abcdé"), Limits: lim}) // é would end at byte 6
	checkPage(t, "cut at a rune", mustRead(t, l, id, 3, 10), "4:abcd", 4, 4, 0, 0, false)
}

func (s *suite) logSkipped(t *testing.T) {
	st, l := s.logs(t)
	id := logTask(t, st)
	mustAppend(t, l, id, store.LogBatch{Lines: textLines("a")})
	mustAppend(t, l, id, store.LogBatch{Lines: textLines("d"), Skipped: 2})
	checkPage(t, "a gap in the middle", mustRead(t, l, id, 1, 10), "4:d", 4, 4, 2, 2, false)
	checkPage(t, "from the start", mustRead(t, l, id, 0, 10), "1:a 4:d", 4, 4, 0, 2, false)
	mustAppend(t, l, id, store.LogBatch{Skipped: 3})
	checkPage(t, "only skipped", mustRead(t, l, id, 4, 10), "", 7, 7, 3, 5, false)
}

func (s *suite) logUnknownTask(t *testing.T) {
	_, l := s.logs(t)
	ctx := context.Background()
	id := task.NewID()
	if err := l.AppendLog(ctx, id, store.LogBatch{Lines: textLines("x")}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("AppendLog of an unknown task = %v, want ErrNotFound", err)
	}
	if _, err := l.ReadLog(ctx, id, 0, 10); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("ReadLog of an unknown task = %v, want ErrNotFound", err)
	}
}

func (s *suite) logGoesWithTask(t *testing.T) {
	ctx := context.Background()
	st, l := s.logs(t)
	expiring, deleted, kept := logTask(t, st), logTask(t, st), logTask(t, st)
	for _, id := range []task.ID{expiring, deleted, kept} {
		mustAppend(t, l, id, store.LogBatch{Lines: textLines("secret output of " + string(id))})
	}
	if _, err := st.Update(ctx, expiring, func(tk *task.Task) error {
		tk.Status = task.Completed
		tk.TTL = time.Millisecond
		tk.LastUpdatedAt = base
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if n, err := st.DeleteExpired(ctx, base.Add(time.Hour)); err != nil || n != 1 {
		t.Fatalf("DeleteExpired = %d, %v; want 1", n, err)
	}
	if err := deleterOf(t, st).Delete(ctx, deleted); err != nil {
		t.Fatal(err)
	}
	for _, id := range []task.ID{expiring, deleted} {
		if _, err := l.ReadLog(ctx, id, 0, 10); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("ReadLog of the gone task %s = %v, want ErrNotFound", id, err)
		}
	}
	checkPage(t, "the other task's log", mustRead(t, l, kept, 0, 10), "1:secret output of "+string(kept), 1, 1, 0, 0, false)
	// A task made again with a gone task's ID starts an empty log: nothing
	// of the old one is left behind.
	again := newTask("alice", base)
	again.ID = deleted
	mustCreate(t, st, again)
	checkPage(t, "a new task under the old ID", mustRead(t, l, deleted, 0, 10), "", 0, 0, 0, 0, false)
}

func (s *suite) logShared(t *testing.T) {
	st, l := s.logs(t)
	l2 := s.shared(t, st)
	id := logTask(t, st)
	mustAppend(t, l, id, store.LogBatch{Lines: textLines("from one")})
	mustAppend(t, l2, id, store.LogBatch{Lines: textLines("from two")})
	checkPage(t, "both", mustRead(t, l, id, 0, 10), "1:from one 2:from two", 2, 2, 0, 0, false)
}
