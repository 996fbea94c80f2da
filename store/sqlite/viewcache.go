package sqlite

import (
	"sync"

	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/task"
)

// The view cache keeps, in memory, the Views of tasks read through the
// Stores of one database file in this process (Options.ViewCache), so
// that a poll of a task that did not change since the last one reads no
// database. Every change to a task is a write of this process when no
// other process writes the file, and each committed write batch drops,
// before its writes return, the entries of the tasks it touched (of every
// task, for the writes that do not say which), so a read after a write
// never sees the state before it. A read that raced a write does not put
// what it read in the cache: each task's stripe of a generation counter,
// read before the statement, must be unchanged after it.
type viewCache struct {
	mu       sync.Mutex
	max      int   // entries
	maxBytes int64 // payload bytes held
	bytes    int64
	n        int // Views held
	m        map[task.ID][]cached
	gen      [256]uint64
}

// cached is one View of a task, read with opts.
type cached struct {
	opts store.ViewOptions
	view *store.View
}

// viewKey is an entry's key: the task and the payloads its View holds.
type viewKey struct {
	id   task.ID
	opts store.ViewOptions
}

// Defaults of the view cache.
const (
	// DefaultViewCacheEntries is the number of Views the cache holds when
	// Options.ViewCache is on and Options.ViewCacheEntries is zero.
	DefaultViewCacheEntries = 16384
	// viewCacheMaxBytes bounds the payload bytes the cache holds.
	viewCacheMaxBytes = 64 << 20
)

func newViewCache(max int) *viewCache {
	if max <= 0 {
		max = DefaultViewCacheEntries
	}
	return &viewCache{max: max, maxBytes: viewCacheMaxBytes, m: map[task.ID][]cached{}}
}

// stripe is the generation stripe of the task id: FNV-1a of the ID, on
// every View (no hasher allocated).
func stripe(id task.ID) int {
	h := uint32(2166136261)
	for i := 0; i < len(id); i++ {
		h ^= uint32(id[i])
		h *= 16777619
	}
	return int(h & 255)
}

// get returns a copy of the cached View of k, if any, and otherwise the
// generation to hand to put after reading it from the database.
func (c *viewCache) get(k viewKey) (v *store.View, gen uint64) {
	c.mu.Lock()
	var e *store.View
	for _, x := range c.m[k.id] {
		if x.opts == k.opts {
			e = x.view
			break
		}
	}
	gen = c.gen[stripe(k.id)]
	c.mu.Unlock()
	if e == nil {
		return nil, gen
	}
	return copyView(e), gen
}

// put keeps v, read from the database, for k if no write touched the
// task since get returned gen.
func (c *viewCache) put(k viewKey, v *store.View, gen uint64) {
	if v == nil || v.Task == nil {
		return
	}
	size := viewBytes(v)
	if size > c.maxBytes/16 {
		return
	}
	kept := copyView(v)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.gen[stripe(k.id)] != gen {
		return
	}
	views := c.m[k.id]
	for i, x := range views {
		if x.opts == k.opts {
			c.bytes -= viewBytes(x.view)
			c.n--
			views = append(views[:i:i], views[i+1:]...)
			break
		}
	}
	c.m[k.id] = views
	for id := range c.m {
		// Room for it: other tasks go (map order is random enough).
		if c.n < c.max && c.bytes+size <= c.maxBytes {
			break
		}
		if id != k.id {
			c.drop(id)
		}
	}
	c.m[k.id] = append(c.m[k.id], cached{opts: k.opts, view: kept})
	c.n++
	c.bytes += size
}

// drop removes the Views of the task id; c.mu is held.
func (c *viewCache) drop(id task.ID) {
	for _, x := range c.m[id] {
		c.bytes -= viewBytes(x.view)
		c.n--
	}
	delete(c.m, id)
}

// invalidate drops the entries of the tasks ids, all of them with all.
func (c *viewCache) invalidate(ids []task.ID, all bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if all {
		for i := range c.gen {
			c.gen[i]++
		}
		clear(c.m)
		c.bytes, c.n = 0, 0
		return
	}
	for _, id := range ids {
		c.gen[stripe(id)]++
		c.drop(id)
	}
}

// viewBytes is the payload size of v, for the cache's bound.
func viewBytes(v *store.View) int64 {
	t := v.Task
	n := len(t.Request) + len(t.Result) + len(t.StatusMessage) + 256
	if t.Error != nil {
		n += len(t.Error.Message) + len(t.Error.Data)
	}
	for _, r := range t.InputRequests {
		n += len(r)
	}
	for _, r := range t.InputResponses {
		n += len(r)
	}
	return int64(n)
}

// copyView returns a copy of v that its reader may change (the task's
// fields, the operation, the log position) without changing v. The byte
// slices and maps of the payloads are shared: no reader changes them.
func copyView(v *store.View) *store.View {
	cp := *v
	if v.Task != nil {
		t := *v.Task
		cp.Task = &t
	}
	if v.Operation != nil {
		o := *v.Operation
		cp.Operation = &o
	}
	if v.Log != nil {
		l := *v.Log
		cp.Log = &l
	}
	return &cp
}
