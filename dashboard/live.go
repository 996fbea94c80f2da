package dashboard

import (
	"context"
	"errors"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/task"
)

// keepAlive is how often an idle live stream sends a comment, so that
// proxies keep it open.
const keepAlive = 15 * time.Second

// changes collects the IDs of changed tasks for one live stream, from
// Engine.Subscribe (which must not block).
type changes struct {
	mu    sync.Mutex
	ids   map[task.ID]struct{}
	wake  chan struct{}
	match func(task.ID) bool // nil: every task
}

func newChanges(match func(task.ID) bool) *changes {
	return &changes{ids: map[task.ID]struct{}{}, wake: make(chan struct{}, 1), match: match}
}

// add records a change (called on the changing goroutine).
func (c *changes) add(id task.ID) {
	if c.match != nil && !c.match(id) {
		return
	}
	c.mu.Lock()
	if len(c.ids) < 4*MaxBulk { // beyond, the stream catches up by its recheck
		c.ids[id] = struct{}{}
	}
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// take returns and forgets the IDs collected.
func (c *changes) take() []task.ID {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]task.ID, 0, len(c.ids))
	for id := range c.ids {
		out = append(out, id)
	}
	clear(c.ids)
	return out
}

// sse writes Server-Sent Events.
type sse struct {
	w  io.Writer
	rc *http.ResponseController
}

// event writes one event named name whose data is data (one "data:"
// field per line) and flushes it.
func (s *sse) event(name, data string) error {
	var b strings.Builder
	b.WriteString("event: ")
	b.WriteString(name)
	b.WriteByte('\n')
	for line := range strings.SplitSeq(data, "\n") {
		b.WriteString("data: ")
		b.WriteString(strings.TrimSuffix(line, "\r"))
		b.WriteByte('\n')
	}
	b.WriteByte('\n')
	if _, err := io.WriteString(s.w, b.String()); err != nil {
		return err
	}
	return s.rc.Flush()
}

// comment writes an SSE comment (a keep-alive) and flushes it.
func (s *sse) comment() error {
	if _, err := io.WriteString(s.w, ": keep-alive\n\n"); err != nil {
		return err
	}
	return s.rc.Flush()
}

// startStream takes a live stream's slot and starts the event stream;
// ok false means the refusal is written.
func (h *Handler) startStream(w http.ResponseWriter) (s *sse, release func(), ok bool) {
	select {
	case h.streams <- struct{}{}:
	default:
		w.Header().Set("Retry-After", "5")
		http.Error(w, "too many live views are open", http.StatusServiceUnavailable)
		return nil, nil, false
	}
	hd := w.Header()
	hd.Set("Content-Type", "text/event-stream")
	hd.Set("Cache-Control", "no-store")
	hd.Set("X-Accel-Buffering", "no") // nginx: do not buffer the stream
	w.WriteHeader(http.StatusOK)
	s = &sse{w: w, rc: http.NewResponseController(w)}
	if err := s.rc.Flush(); err != nil {
		<-h.streams
		return nil, nil, false
	}
	return s, func() { <-h.streams }, true
}

// follow runs a live stream: send is called at once, then after changes
// (collected by c, at most every LiveInterval) and every
// RecheckInterval; the stream ends when send says so (done), the
// visitor leaves, or Close is called.
// A tick of again (nil for none) calls send as a recheck too.
func (h *Handler) follow(ctx context.Context, s *sse, c *changes, again <-chan time.Time, send func(ids []task.ID, recheck bool) (done bool, err error)) {
	unsub := h.opts.Engine.Subscribe(c.add)
	defer unsub()
	recheck := time.NewTicker(h.opts.RecheckInterval)
	defer recheck.Stop()
	idle := time.NewTicker(keepAlive)
	defer idle.Stop()
	if done, err := send(nil, true); done || err != nil {
		return
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-h.closed():
			return
		case <-idle.C:
			if s.comment() != nil {
				return
			}
			continue
		case <-recheck.C:
			if done, err := send(c.take(), true); done || err != nil {
				return
			}
			continue
		case <-again:
			if done, err := send(c.take(), true); done || err != nil {
				return
			}
			continue
		case <-c.wake:
		}
		// Let the changes of a burst gather, then send them together.
		t := time.NewTimer(h.opts.LiveInterval)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-h.closed():
			t.Stop()
			return
		case <-t.C:
		}
		if done, err := send(c.take(), false); done || err != nil {
			return
		}
	}
}

// serveListLive streams the list's updates: "row" events (a changed
// task's row, rendered, when it matches the list's filters), "gone"
// events (a deleted task's ID) and "counts" events (the counts strip,
// when it changed).
func (h *Handler) serveListLive(w http.ResponseWriter, r *http.Request, v *visitor) {
	f := parseFilter(r.URL.Query())
	s, release, ok := h.startStream(w)
	if !ok {
		return
	}
	defer release()
	ctx := r.Context()
	var lastCounts string
	// Counts are read at most every countsMaxAge (shared by the views of
	// the same filters): when the counts at hand are older than the
	// changes just sent, they are read again once they have aged.
	again := time.NewTimer(time.Hour)
	again.Stop()
	defer again.Stop()
	h.follow(ctx, s, newChanges(nil), again.C, func(ids []task.ID, recheck bool) (bool, error) {
		now := h.now()
		slices.Sort(ids)
		for _, id := range ids {
			t, err := h.opts.Store.Get(ctx, id)
			if errors.Is(err, store.ErrNotFound) {
				if err := s.event("gone", string(id)); err != nil {
					return true, err
				}
				continue
			}
			if err != nil {
				return false, nil // the store failed: the next change or recheck tries again
			}
			if !matches(f, t) {
				continue
			}
			html, err := h.fragment("row", h.rowOf(t, now))
			if err != nil {
				return true, err
			}
			if err := s.event("row", html); err != nil {
				return true, err
			}
		}
		if len(ids) == 0 && !recheck {
			return false, nil
		}
		c, at, err := h.counts(r, f, time.Time{})
		if err != nil {
			return false, nil
		}
		if len(ids) > 0 && at.Before(now) {
			again.Reset(countsMaxAge - now.Sub(at) + time.Millisecond)
		}
		html, err := h.fragment("counts", c)
		if err != nil {
			return true, err
		}
		if html != lastCounts {
			lastCounts = html
			if err := s.event("counts", html); err != nil {
				return true, err
			}
		}
		return false, nil
	})
}

// matches reports whether t is selected by f.
func matches(f *filter, t *task.Task) bool {
	q := f.query
	switch {
	case (len(q.Statuses) > 0 || len(q.Outcomes) > 0) &&
		!slices.Contains(q.Statuses, t.Status) && !slices.Contains(q.Outcomes, t.Outcome()),
		q.Tool != "" && t.Tool != q.Tool,
		q.Owner != "" && t.Owner != q.Owner,
		q.Parent != "" && t.Parent != q.Parent,
		q.TopLevel && t.Parent != "",
		!q.CreatedAfter.IsZero() && t.CreatedAt.Before(q.CreatedAfter),
		!q.CreatedBefore.IsZero() && !t.CreatedAt.Before(q.CreatedBefore):
		return false
	}
	return true
}

// serveTaskLive streams a task page's updates: "task" events (the live
// part of the page, with its children, rendered, when it changed) and a
// "gone" event when the task is deleted, which ends the stream.
func (h *Handler) serveTaskLive(w http.ResponseWriter, r *http.Request, v *visitor) {
	id := task.ID(r.PathValue("id"))
	if _, err := h.opts.Store.Get(r.Context(), id); err != nil {
		http.Error(w, "no such task", http.StatusNotFound)
		return
	}
	s, release, ok := h.startStream(w)
	if !ok {
		return
	}
	defer release()
	last := r.URL.Query().Get("v") // the version the page shows
	// The page follows the task and the children it lists (a new child
	// appears with the next recheck, or the task's next change).
	var kids atomic.Pointer[map[task.ID]bool]
	match := func(x task.ID) bool {
		if x == id {
			return true
		}
		k := kids.Load()
		return k != nil && (*k)[x]
	}
	h.follow(r.Context(), s, newChanges(match), nil, func(ids []task.ID, recheck bool) (bool, error) {
		l, err := h.loadTask(r, id)
		if errors.Is(err, store.ErrNotFound) {
			return true, s.event("gone", string(id))
		}
		if err != nil {
			return false, nil
		}
		k := make(map[task.ID]bool, len(l.Children))
		for _, c := range l.Children {
			k[task.ID(c.ID)] = true
		}
		kids.Store(&k)
		// The fragment goes into the task's page, /tasks/{id}: its links are
		// relative to that page, one level above this stream.
		html, err := h.fragment("taskLive", &taskPage{Base: "../", CSRF: v.csrf, Live: l})
		if err != nil {
			return true, err
		}
		if v := fragmentVersion(html); v != last {
			last = v
			return false, s.event("task", html)
		}
		return false, nil
	})
}

// Close ends the live streams being served, and makes new ones end at
// once: call it when the server shuts down (http.Server.Shutdown waits
// for them otherwise; see http.Server.RegisterOnShutdown).
func (h *Handler) Close() {
	h.closeOnce.Do(func() {
		close(h.done)
		h.unsub()
	})
}

// closed returns a channel closed by Close.
func (h *Handler) closed() <-chan struct{} { return h.done }
