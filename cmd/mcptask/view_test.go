package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/mcptask/mcptask/client"
)

func TestStatusViewPlain(t *testing.T) {
	var b bytes.Buffer
	v := newStatusView(&b, viewPlain, nil)
	st := &client.TaskStatus{ID: "t1", Status: "working", StatusMessage: "step 1 of 2"}
	v.Update(st)
	v.Update(st) // no change, no line
	st2 := *st
	st2.StatusMessage = "step 2 of 2"
	v.Update(&st2)
	v.Notef("a note")
	v.Close()
	want := "mcptask: working: step 1 of 2\nmcptask: working: step 2 of 2\na note\n"
	if b.String() != want {
		t.Errorf("got %q, want %q", b.String(), want)
	}

	b.Reset()
	q := newStatusView(&b, viewQuiet, nil)
	q.Update(st)
	q.Close()
	if b.Len() != 0 {
		t.Errorf("quiet view printed %q", b.String())
	}
}

func TestStatusViewLive(t *testing.T) {
	var b lockedBuffer
	v := newStatusView(&b, viewLive, func() int { return 40 })
	created := time.Now().Add(-3 * time.Second)
	v.Update(&client.TaskStatus{ID: "t1", Status: "working", StatusMessage: strings.Repeat("long message ", 10), CreatedAt: created})
	v.Notef("note")
	v.Update(&client.TaskStatus{ID: "t1", Status: "completed", StatusMessage: "done", CreatedAt: created, LastUpdatedAt: created.Add(4 * time.Second)})
	v.Close()
	out := b.String()
	for _, s := range []string{"\r\x1b[K", "working 3.", "…", "note\n", "completed 4.0s · done\n"} {
		if !strings.Contains(out, s) {
			t.Errorf("live output lacks %q: %q", s, out)
		}
	}
	for line := range strings.SplitSeq(out, "\r\x1b[K") {
		for l := range strings.SplitSeq(line, "\n") {
			if n := len([]rune(l)); n > 39 {
				t.Errorf("line of %d runes on a 40-column terminal: %q", n, l)
			}
		}
	}
}

type lockedBuffer struct {
	mu chan struct{}
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.lock()
	defer l.unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.lock()
	defer l.unlock()
	return l.b.String()
}

func (l *lockedBuffer) lock() {
	if l.mu == nil {
		l.mu = make(chan struct{}, 1)
	}
	l.mu <- struct{}{}
}

func (l *lockedBuffer) unlock() { <-l.mu }

func TestFormatElapsed(t *testing.T) {
	for d, want := range map[time.Duration]string{
		1500 * time.Millisecond:     "1.5s",
		42 * time.Second:            "42s",
		65 * time.Second:            "1m05s",
		2*time.Hour + 3*time.Minute: "2h03m",
	} {
		if got := formatElapsed(d); got != want {
			t.Errorf("formatElapsed(%v) = %q, want %q", d, got, want)
		}
	}
}
