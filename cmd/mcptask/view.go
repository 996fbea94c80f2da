package main

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/mcptask/mcptask/client"
)

// viewMode is how the status of waits is shown on stderr.
type viewMode int

const (
	viewQuiet viewMode = iota // nothing (--json without a terminal)
	viewPlain                 // one line per change (not a terminal)
	viewLive                  // one line rewritten in place (a terminal)
)

// redrawEvery is how often the live line is redrawn (elapsed time, spinner).
const redrawEvery = 150 * time.Millisecond

var spinner = []string{"⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"}

// statusView shows the status of one or more tasks on stderr: a live line
// rewritten in place on a terminal, plain lines otherwise. Other output on
// stderr goes through Notef so that it does not mix with the live line.
type statusView struct {
	mu     sync.Mutex
	w      io.Writer
	mode   viewMode
	width  func() int
	start  time.Time
	label  string // shown until the first status, e.g. "calling TOOL"
	tasks  map[string]*viewTask
	order  []string
	last   string // the task updated last
	drawn  bool   // the live line is on screen
	paused int
	frame  int
	stop   chan struct{}
	done   sync.WaitGroup
}

type viewTask struct {
	st      client.TaskStatus
	since   time.Time // when the task started, for the elapsed time
	printed string    // the last plain line printed
	settled bool      // its outcome was printed: no longer on the live line
}

func newStatusView(w io.Writer, mode viewMode, width func() int) *statusView {
	v := &statusView{w: w, mode: mode, width: width, start: time.Now(), tasks: map[string]*viewTask{}, stop: make(chan struct{})}
	if mode == viewLive {
		v.done.Go(func() {
			t := time.NewTicker(redrawEvery)
			defer t.Stop()
			for {
				select {
				case <-v.stop:
					return
				case <-t.C:
					v.mu.Lock()
					v.frame++
					v.redraw()
					v.mu.Unlock()
				}
			}
		})
	}
	return v
}

// SetLabel sets what the live line shows before the first status.
func (v *statusView) SetLabel(s string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.label = s
	v.redraw()
}

// Update records a task's status and shows it.
func (v *statusView) Update(s *client.TaskStatus) {
	if s == nil {
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	t := v.tasks[s.ID]
	if t == nil {
		t = &viewTask{since: time.Now()}
		if !s.CreatedAt.IsZero() && !s.CreatedAt.After(time.Now().Add(2*time.Second)) {
			t.since = s.CreatedAt // also right for a task started long ago
		}
		v.tasks[s.ID] = t
		v.order = append(v.order, s.ID)
	}
	t.st = *s
	v.last = s.ID
	switch v.mode {
	case viewPlain:
		line := v.plainLine(s.ID, t)
		if line != t.printed {
			t.printed = line
			fmt.Fprintln(v.w, line)
		}
	case viewLive:
		v.redraw()
	}
}

// Last returns the last status seen of a task, or nil.
func (v *statusView) Last(id string) *client.TaskStatus {
	v.mu.Lock()
	defer v.mu.Unlock()
	if t := v.tasks[id]; t != nil {
		s := t.st
		return &s
	}
	return nil
}

// Settle takes a task off the live line once its outcome is printed; on a
// terminal its final status stays on screen, above the outcome.
func (v *statusView) Settle(id string) {
	v.mu.Lock()
	defer v.mu.Unlock()
	t := v.tasks[id]
	if t == nil || t.settled {
		return
	}
	t.settled = true
	if v.mode == viewLive {
		v.clear()
		if t.st.Terminal() {
			fmt.Fprintln(v.w, v.fit(v.liveText(id, t, "")))
		}
	}
	if v.last == id {
		v.last = ""
		var latest time.Time
		for _, other := range v.order {
			if o := v.tasks[other]; !o.settled && (v.last == "" || o.st.LastUpdatedAt.After(latest)) {
				v.last, latest = other, o.st.LastUpdatedAt
			}
		}
	}
	v.redraw()
}

// Notef prints a line on stderr, above the live line.
func (v *statusView) Notef(format string, args ...any) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.clear()
	fmt.Fprintf(v.w, format+"\n", args...)
	v.redraw()
}

// Pause removes the live line until Resume (during a prompt).
func (v *statusView) Pause() {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.clear()
	v.paused++
}

// Resume shows the live line again.
func (v *statusView) Resume() {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.paused--
	v.redraw()
}

// Close stops the live line. If the last task shown has ended, its final
// status stays on screen; otherwise the line is erased.
func (v *statusView) Close() {
	select {
	case <-v.stop:
		return
	default:
	}
	close(v.stop)
	v.done.Wait()
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.mode != viewLive {
		return
	}
	v.clear()
	if t := v.tasks[v.last]; t != nil && !t.settled && t.st.Terminal() && v.paused == 0 {
		fmt.Fprintln(v.w, v.fit(v.liveText(v.last, t, "")))
	}
}

// clear erases the live line. The caller holds mu.
func (v *statusView) clear() {
	if v.drawn {
		fmt.Fprint(v.w, "\r\x1b[K")
		v.drawn = false
	}
}

// redraw rewrites the live line. The caller holds mu.
func (v *statusView) redraw() {
	if v.mode != viewLive || v.paused > 0 {
		return
	}
	select {
	case <-v.stop:
		return
	default:
	}
	var text string
	spin := spinner[v.frame%len(spinner)] + " "
	if t := v.tasks[v.last]; t != nil {
		text = v.liveText(v.last, t, spin)
	} else if v.label != "" {
		text = spin + v.label + " " + formatElapsed(time.Since(v.start))
	} else {
		return
	}
	fmt.Fprint(v.w, "\r\x1b[K"+v.fit(text))
	v.drawn = true
}

// liveText is the live line of a task: status, elapsed time, message.
func (v *statusView) liveText(id string, t *viewTask, spin string) string {
	var b strings.Builder
	b.WriteString(spin)
	if len(v.order) > 1 {
		if spin != "" {
			open := 0
			for _, o := range v.tasks {
				if !o.settled {
					open++
				}
			}
			fmt.Fprintf(&b, "[%d waiting] ", open)
		}
		b.WriteString(shortID(id) + " ")
	}
	b.WriteString(t.st.Status)
	b.WriteString(" " + formatElapsed(v.elapsed(t)))
	if t.st.StatusMessage != "" {
		b.WriteString(" · " + oneLine(t.st.StatusMessage))
	}
	return b.String()
}

func (v *statusView) elapsed(t *viewTask) time.Duration {
	end := time.Now()
	if t.st.Terminal() && !t.st.LastUpdatedAt.IsZero() && t.st.LastUpdatedAt.After(t.since) {
		end = t.st.LastUpdatedAt
	}
	return max(0, end.Sub(t.since))
}

// plainLine is the line printed for a status change when stderr is not a
// terminal. It leaves out the elapsed time so that a new line means a new
// status or message.
func (v *statusView) plainLine(id string, t *viewTask) string {
	line := "mcptask: task " + id + ": " + t.st.Status
	if len(v.order) <= 1 {
		line = "mcptask: " + t.st.Status
	}
	if t.st.StatusMessage != "" {
		line += ": " + oneLine(t.st.StatusMessage)
	}
	return line
}

// fit cuts text to the terminal's width so that \r can rewrite it.
func (v *statusView) fit(text string) string {
	w := 0
	if v.width != nil {
		w = v.width()
	}
	if w <= 0 {
		w = 80
	}
	w-- // leave the last column free: some terminals wrap on it
	if utf8.RuneCountInString(text) <= w {
		return text
	}
	r := []rune(text)
	return string(r[:max(0, w-1)]) + "…"
}

func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// shortID abbreviates a task ID for the live line.
func shortID(id string) string {
	if len(id) > 10 {
		return id[:8] + "…"
	}
	return id
}

// formatElapsed shows a duration the way a person reads it: 3.4s, 1m05s,
// 2h03m.
func formatElapsed(d time.Duration) string {
	switch {
	case d < 10*time.Second:
		return fmt.Sprintf("%.1fs", d.Seconds())
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	default:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
}
