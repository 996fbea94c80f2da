package client

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// JournalEntry is one task in flight, as the journal records it: a task
// the server created (TaskID set), or a call sent with an idempotency key
// whose answer never came (TaskID empty: its outcome is unknown, and
// [Client.Resume] re-sends it with the same key, which returns the task the
// server created, if it did, instead of running the tool again).
type JournalEntry struct {
	TaskID    string    `json:"taskId"`
	Target    string    `json:"target"` // server URL or transport name
	Wire      string    `json:"wire"`
	Tool      string    `json:"tool"`
	CreatedAt time.Time `json:"createdAt"`
	// IdempotencyKey is the key the call was sent with, if any.
	IdempotencyKey string `json:"idempotencyKey,omitempty"`
	// Arguments are the call's arguments, kept only while its outcome is
	// unknown (TaskID empty), so that it can be re-sent exactly.
	Arguments json.RawMessage `json:"arguments,omitempty"`
}

// Unsent reports whether the entry is a call whose answer never came:
// no task is known for it yet.
func (e JournalEntry) Unsent() bool { return e.TaskID == "" }

// ErrJournalCorrupt means the journal file cannot be read as a journal. The
// client never resets it silently (that would forget tasks in flight): move
// the file aside to start a new one.
var ErrJournalCorrupt = errors.New("the task journal is corrupt")

// ReadJournal returns every task in flight that the journal file at path
// records, whatever its target ([Client.Pending] returns those of one
// client's target, and needs a connection). A missing or empty file records
// none. A file that is not a journal is an error wrapping
// [ErrJournalCorrupt], and is left untouched. Reading takes no lock: the
// journal is replaced whole and atomically, so a reader sees it before or
// after a change, never during one.
func ReadJournal(path string) ([]JournalEntry, error) {
	if path == "" {
		return nil, errors.New("client: ReadJournal needs the journal's path")
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("task journal %s: %w", path, err)
	}
	return (&journal{path: abs}).load()
}

// DefaultJournalPath returns the journal file a host uses unless told
// otherwise: mcptask/journal.json under the user's cache directory
// ([os.UserCacheDir]). It fails where the platform defines no such
// directory (e.g. neither $XDG_CACHE_HOME nor $HOME is set).
func DefaultJournalPath() (string, error) {
	dir, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "mcptask", "journal.json"), nil
}

// journalVersion is the format version of the journal file.
const journalVersion = 1

// journalFile is the on-disk form of the journal: a small JSON document,
// rewritten whole and atomically (temporary file, fsync, rename, fsync of
// the directory) at each change.
type journalFile struct {
	Version int            `json:"version"`
	Tasks   []JournalEntry `json:"tasks"`
}

// journal is the durable list of tasks in flight. Changes are serialised
// within the process by a mutex and across processes by an exclusive lock
// on path+".lock" (flock, on Unix), and each one re-reads the file, so
// several hosts may share one journal.
type journal struct {
	path string
	mu   sync.Mutex
}

// openJournal checks that the journal at path is readable (a missing file
// is an empty journal).
func openJournal(path string) (*journal, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("task journal %s: %w", path, err)
	}
	j := &journal{path: abs}
	if _, err := j.load(); err != nil {
		return nil, err
	}
	return j, nil
}

// load reads the journal's entries.
func (j *journal) load() ([]JournalEntry, error) {
	b, err := os.ReadFile(j.path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the task journal %s: %w", j.path, err)
	}
	if len(bytes.TrimSpace(b)) == 0 {
		return nil, nil // an empty file holds no tasks
	}
	corrupt := func(why string) error {
		return fmt.Errorf("%w: %s: %s; it is left untouched: move it aside (e.g. mv %s %s.bad) to start a new journal, "+
			"after which the tasks it lists are no longer resumed", ErrJournalCorrupt, j.path, why, j.path, j.path)
	}
	var f journalFile
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&f); err != nil {
		return nil, corrupt("not a journal (" + err.Error() + ")")
	}
	if dec.More() {
		return nil, corrupt("trailing data after the journal")
	}
	if f.Version != journalVersion {
		return nil, corrupt(fmt.Sprintf("unknown format version %d (this client reads version %d)", f.Version, journalVersion))
	}
	for i, e := range f.Tasks {
		if (e.TaskID == "" && e.IdempotencyKey == "") || e.Target == "" {
			return nil, corrupt(fmt.Sprintf("entry %d has no taskId (nor idempotencyKey) or no target", i))
		}
	}
	return f.Tasks, nil
}

// update applies fn to the entries under both locks and writes the result
// back when fn reports a change.
func (j *journal) update(fn func([]JournalEntry) ([]JournalEntry, bool)) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if err := os.MkdirAll(filepath.Dir(j.path), 0o700); err != nil {
		return fmt.Errorf("task journal %s: %w", j.path, err)
	}
	unlock, err := lockFile(j.path + ".lock")
	if err != nil {
		return fmt.Errorf("locking the task journal %s: %w", j.path, err)
	}
	defer unlock()
	entries, err := j.load()
	if err != nil {
		return err
	}
	entries, changed := fn(entries)
	if !changed {
		return nil
	}
	return j.write(entries)
}

// write replaces the journal file atomically.
func (j *journal) write(entries []JournalEntry) error {
	if entries == nil {
		entries = []JournalEntry{}
	}
	b, err := json.MarshalIndent(journalFile{Version: journalVersion, Tasks: entries}, "", "  ")
	if err != nil {
		return err
	}
	b = append(b, '\n')
	dir := filepath.Dir(j.path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(j.path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("writing the task journal %s: %w", j.path, err)
	}
	ok := false
	defer func() {
		if !ok {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if _, err := tmp.Write(b); err != nil {
		return fmt.Errorf("writing the task journal %s: %w", j.path, err)
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("writing the task journal %s: %w", j.path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("writing the task journal %s: %w", j.path, err)
	}
	if err := os.Rename(tmp.Name(), j.path); err != nil {
		return fmt.Errorf("writing the task journal %s: %w", j.path, err)
	}
	ok = true
	syncDir(dir)
	return nil
}

// add records a task in flight (replacing an entry of the same target and
// task ID).
func (j *journal) add(e JournalEntry) error {
	return j.update(func(es []JournalEntry) ([]JournalEntry, bool) {
		for i := range es {
			if es[i].Target == e.Target && es[i].TaskID == e.TaskID {
				es[i] = e
				return es, true
			}
		}
		return append(es, e), true
	})
}

// addUnsent records a call about to be sent with an idempotency key.
func (j *journal) addUnsent(e JournalEntry) error {
	return j.update(func(es []JournalEntry) ([]JournalEntry, bool) {
		return append(es, e), true
	})
}

// settle records the task the server created for the call sent with key:
// the entry now names the task and forgets the arguments.
func (j *journal) settle(target, key string, task JournalEntry) error {
	return j.update(func(es []JournalEntry) ([]JournalEntry, bool) {
		for i := range es {
			if es[i].Target == target && es[i].TaskID == "" && es[i].IdempotencyKey == key {
				task.IdempotencyKey = key
				es[i] = task
				return es, true
			}
		}
		task.IdempotencyKey = key
		return append(es, task), true
	})
}

// removeUnsent drops the call sent with key (the server answered it
// without a task, or refused it).
func (j *journal) removeUnsent(target, key string) error {
	return j.update(func(es []JournalEntry) ([]JournalEntry, bool) {
		out := es[:0]
		for _, e := range es {
			if e.Target != target || e.TaskID != "" || e.IdempotencyKey != key {
				out = append(out, e)
			}
		}
		return out, len(out) != len(es)
	})
}

// remove drops a task from the journal; a task it does not list is fine.
func (j *journal) remove(target, taskID string) error {
	if taskID == "" {
		return nil // an unsent call is removed by its key (removeUnsent)
	}
	return j.update(func(es []JournalEntry) ([]JournalEntry, bool) {
		out := es[:0]
		for _, e := range es {
			if e.Target != target || e.TaskID != taskID {
				out = append(out, e)
			}
		}
		return out, len(out) != len(es)
	})
}

// pending returns the entries of target.
func (j *journal) pending(target string) ([]JournalEntry, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	es, err := j.load()
	if err != nil {
		return nil, err
	}
	var out []JournalEntry
	for _, e := range es {
		if e.Target == target {
			out = append(out, e)
		}
	}
	return out, nil
}

// syncDir flushes a directory entry change (the rename) to disk, where the
// platform allows it.
func syncDir(dir string) {
	d, err := os.Open(dir)
	if err != nil {
		return
	}
	_ = d.Sync()
	d.Close()
}
