package sqlite

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"sync/atomic"

	"github.com/mcptask/mcptask/task"
)

// maxFeedBacklog bounds the announcements a Changes call may have waiting
// for its fn. A listener that falls this far behind is dropped: its
// Changes returns [ErrFeedBehind], and its caller, who may call again,
// covers what it missed as after any interruption of the feed.
const maxFeedBacklog = 1 << 14

// ErrFeedBehind is returned by [Store.Changes] when its fn fell so far
// behind the writes that announcements had to be dropped.
var ErrFeedBehind = errors.New("sqlite store: change feed: the listener fell behind; announcements were dropped")

// A hub relays the announcements of every *Store of the process that has
// one database file open to the Changes calls on any of them.
type hub struct {
	key  string
	refs int // Stores holding the hub; guarded by hubs.mu

	mu   sync.Mutex
	subs map[*listener]struct{}

	// cache is the file's view cache (viewcache.go), nil until a Store
	// with Options.ViewCache opens the file.
	cache atomic.Pointer[viewCache]
}

// views returns the file's view cache, nil if it has none.
func (h *hub) views() *viewCache { return h.cache.Load() }

// enableViews gives the file a view cache of max entries, if it has none.
func (h *hub) enableViews(max int) *viewCache {
	h.cache.CompareAndSwap(nil, newViewCache(max))
	return h.cache.Load()
}

// A listener is one running Changes call.
type listener struct {
	mu      sync.Mutex
	pending []task.ID
	behind  bool          // pending overflowed: the listener is dropped
	wake    chan struct{} // capacity 1: something is pending, or behind
}

// hubs holds the hub of each database file open in the process, by its
// absolute path with symbolic links resolved.
var hubs = struct {
	mu sync.Mutex
	m  map[string]*hub
}{m: map[string]*hub{}}

// hubKey names the database file at the absolute path abs, which exists:
// two paths of one file (through a symbolic link) give the same key.
func hubKey(abs string) string {
	if p, err := filepath.EvalSymlinks(abs); err == nil {
		return p
	}
	return abs
}

// acquireHub returns the hub of the file named key, creating it if no
// Store of the process has the file open.
func acquireHub(key string) *hub {
	hubs.mu.Lock()
	defer hubs.mu.Unlock()
	h := hubs.m[key]
	if h == nil {
		h = &hub{key: key, subs: map[*listener]struct{}{}}
		hubs.m[key] = h
	}
	h.refs++
	return h
}

// releaseHub gives back a hub returned by acquireHub.
func releaseHub(h *hub) {
	hubs.mu.Lock()
	defer hubs.mu.Unlock()
	h.refs--
	if h.refs == 0 {
		delete(hubs.m, h.key)
	}
}

// publish announces ids, committed, to every listener of the hub. It never
// blocks on a listener: one whose backlog is full is marked behind.
func (h *hub) publish(ids []task.ID) {
	if len(ids) == 0 {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for l := range h.subs {
		l.mu.Lock()
		if !l.behind {
			if len(l.pending)+len(ids) > maxFeedBacklog {
				l.behind, l.pending = true, nil
			} else {
				l.pending = append(l.pending, ids...)
			}
		}
		l.mu.Unlock()
		select {
		case l.wake <- struct{}{}:
		default:
		}
	}
}

func (h *hub) subscribe(l *listener) {
	h.mu.Lock()
	h.subs[l] = struct{}{}
	h.mu.Unlock()
}

func (h *hub) unsubscribe(l *listener) {
	h.mu.Lock()
	delete(h.subs, l)
	h.mu.Unlock()
}

// take returns what is pending and whether the listener fell behind.
func (l *listener) take() ([]task.ID, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	ids := l.pending
	l.pending = nil
	return ids, l.behind
}

// Changes implements [store.ChangeFeed]: it calls fn, in the calling
// goroutine, with the ID of every task whose Update or Claim commits
// through any *Store of this process that has the same database file open
// (this one included; paths are compared after resolving symbolic links),
// until ctx is done, this store is closed, or fn falls behind. It then
// returns ctx's error, [ErrClosed] or [ErrFeedBehind]; the caller may call
// it again, and covers with polling what was announced in between.
//
// Delete is announced too (the task then reads as unknown). Creations,
// Heartbeat and DeleteExpired announce nothing. The
// writes of other processes sharing the file are not announced either:
// mcptaskd runs one process per SQLite file (it holds a lock on it), so
// that every engine of the file is in the process and sees them all.
//
// The engine using this Store hears of its own writes too, and reads each
// such task once more (a cheap local Get); that keeps one rule for every
// Store of the file, whichever engine wrote.
//
// ready (if not nil) is called once the feed is in effect, before Changes
// waits for the first announcement: every Update or Claim committed after
// that is announced. An ID may be announced more than once. fn must be
// quick: announcements wait for it, and a listener that leaves too many
// waiting is dropped (ErrFeedBehind).
func (s *Store) Changes(ctx context.Context, ready func(), fn func(task.ID)) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.feedMu.Lock()
	if s.closed() {
		s.feedMu.Unlock()
		return ErrClosed
	}
	s.feeds.Add(1)
	s.feedMu.Unlock()
	defer s.feeds.Done()

	l := &listener{wake: make(chan struct{}, 1)}
	s.hub.subscribe(l)
	defer s.hub.unsubscribe(l)
	if ready != nil {
		ready()
	}
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-s.closing:
			return ErrClosed
		case <-l.wake:
		}
		ids, behind := l.take()
		if behind {
			return ErrFeedBehind
		}
		for _, id := range ids {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			fn(id)
		}
	}
}
