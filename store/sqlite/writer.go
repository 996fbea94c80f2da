package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"runtime/debug"
	"sync/atomic"

	"github.com/mcptask/mcptask/task"
)

// maxBatch bounds the number of writes committed by one transaction.
const maxBatch = 256

// An op is one write, run by the writer goroutine inside a batch
// transaction. run returns the IDs of the tasks to announce (see
// Store.Changes) when it has written, or an error when it has not; its
// writes are then rolled back to a savepoint, so they never mix with those
// of the other ops of the batch.
type op struct {
	run     func(tx *sql.Tx) ([]task.ID, error)
	state   atomic.Int32
	done    chan struct{} // closed when err is final
	err     error
	changed []task.ID // what run changed, announced once committed
	// touch says which existing tasks the op may change, for the view
	// cache: touchAll, the default, any; touchListed, those run returned
	// (announced only when announce is set); touchNone, none (an insert).
	touch    touchKind
	announce bool
}

// touchKind says which tasks a write may change (see op.touch).
type touchKind int

const (
	touchAll touchKind = iota
	touchListed
	touchNone
)

// op states: a caller whose context ends first abandons its op, and the
// writer skips it; once the writer has taken it, the caller waits for the
// outcome, which is then the truth about the database.
const (
	opPending int32 = iota
	opTaken
	opAbandoned
)

// fnPanic carries a panic of an Update function to the caller's goroutine.
type fnPanic struct {
	value any
	stack []byte
}

func (p *fnPanic) Error() string { return fmt.Sprintf("panic in Update function: %v", p.value) }

func callFn(fn func(*task.Task) error, t *task.Task) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &fnPanic{value: v, stack: debug.Stack()}
		}
	}()
	return fn(t)
}

// write hands run to the writer goroutine and waits until it is committed
// or has failed.
func (s *Store) write(ctx context.Context, run func(tx *sql.Tx) error) error {
	return s.submit(ctx, &op{run: func(tx *sql.Tx) ([]task.ID, error) { return nil, run(tx) }, touch: touchAll})
}

// writeNew is write for a run that only inserts new tasks (and their
// rows): it changes no task that exists.
func (s *Store) writeNew(ctx context.Context, run func(tx *sql.Tx) error) error {
	return s.submit(ctx, &op{run: func(tx *sql.Tx) ([]task.ID, error) { return nil, run(tx) }, touch: touchNone})
}

// writeTouching is write for a run that changes only the tasks whose IDs
// it returns (their operations, logs or leases), without announcing them.
func (s *Store) writeTouching(ctx context.Context, run func(tx *sql.Tx) ([]task.ID, error)) error {
	return s.submit(ctx, &op{run: run, touch: touchListed})
}

// writeChanges is write for a run that changes tasks to announce: once
// its batch is committed, the IDs it returned are published to the
// process's Changes calls on this file, before writeChanges returns.
func (s *Store) writeChanges(ctx context.Context, run func(tx *sql.Tx) ([]task.ID, error)) error {
	return s.submit(ctx, &op{run: run, touch: touchListed, announce: true})
}

// submit hands o to the writer goroutine and waits for its outcome.
func (s *Store) submit(ctx context.Context, o *op) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if s.closed() {
		return ErrClosed
	}
	o.done = make(chan struct{})
	select {
	case s.ops <- o:
	case <-s.closing:
		return ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-o.done:
	case <-ctx.Done():
		if o.state.CompareAndSwap(opPending, opAbandoned) {
			return ctx.Err()
		}
		<-o.done
	}
	if p, ok := o.err.(*fnPanic); ok {
		panic(p.value)
	}
	return o.err
}

// writeLoop is the writer goroutine: it takes the ops that are waiting,
// runs them in one transaction and commits them with one disk flush.
func (s *Store) writeLoop() {
	defer close(s.writerDone)
	batch := make([]*op, 0, maxBatch)
	for {
		select {
		case o := <-s.ops:
			batch = append(batch[:0], o)
		case <-s.closing:
			return
		}
	more:
		for len(batch) < maxBatch {
			select {
			case o := <-s.ops:
				batch = append(batch, o)
			default:
				break more
			}
		}
		s.runBatch(batch)
		clear(batch)
	}
}

func (s *Store) runBatch(batch []*op) {
	live := batch[:0]
	for _, o := range batch {
		if o.state.CompareAndSwap(opPending, opTaken) {
			live = append(live, o)
		}
	}
	if len(live) == 0 {
		return
	}
	defer func() {
		for _, o := range live {
			if p, ok := o.err.(*fnPanic); ok {
				s.log.Error("sqlite store: panic in Update function", "panic", p.value, "stack", string(p.stack))
			}
			close(o.done)
		}
	}()

	// A batch written to a file that is no longer at the path would be
	// acknowledged and then lost: refuse it, loudly.
	if err := s.checkFile(); err != nil {
		for _, o := range live {
			o.err = err
		}
		s.log.Error("sqlite store: refusing writes", "err", err)
		return
	}
	// The statements of a batch never see a caller's context: interrupting
	// one statement would roll back the whole batch.
	ctx := context.Background()
	tx, err := s.wdb.BeginTx(ctx, nil) // BEGIN IMMEDIATE
	if err != nil {
		err = s.noteCorrupt(fmt.Errorf("sqlite store: begin: %w", err))
		for _, o := range live {
			o.err = err
		}
		s.log.Error("sqlite store: cannot begin a write transaction", "err", err)
		return
	}

	wrote := make([]bool, len(live))
	var abort error
	// An op alone in its batch needs no savepoint: when it fails, the
	// transaction is rolled back whole. (A savepoint costs two
	// statements, and SQLite copies each page the op changes into the
	// savepoint's journal: a tenth of a lone create's CPU.)
	alone := len(live) == 1
	for i, o := range live {
		if !alone {
			if _, err := tx.ExecContext(ctx, "SAVEPOINT op"); err != nil {
				abort = err
				break
			}
		}
		if o.changed, o.err = o.run(tx); o.err != nil {
			o.changed = nil
			if alone {
				break
			}
			// Undo whatever the op did. If even that fails, SQLite has
			// rolled back the whole transaction (I/O error, disk full...).
			if _, err := tx.ExecContext(ctx, "ROLLBACK TO op"); err != nil {
				abort = err
				break
			}
		} else {
			wrote[i] = true
		}
		if !alone {
			if _, err := tx.ExecContext(ctx, "RELEASE op"); err != nil {
				abort = err
				break
			}
		}
	}
	if alone && abort == nil && live[0].err != nil {
		// The lone op failed: nothing is kept, and it keeps its own
		// error.
		if err := rollback(tx); err != nil {
			s.log.Error("sqlite store: cannot roll back a failed write", "err", s.noteCorrupt(err))
		}
		if o := live[0]; isCorruption(o.err) {
			o.err = s.noteCorrupt(o.err)
		}
		return
	}
	if abort == nil {
		abort = tx.Commit()
		// Before any of the batch's writes returns: a read after it
		// must not find the state before it in the view cache.
		s.invalidateViews(live)
		if abort != nil {
			abort = fmt.Errorf("sqlite store: commit: %w", abort)
		} else {
			s.announce(live)
		}
	} else {
		abort = fmt.Errorf("sqlite store: write transaction aborted: %w", abort)
		if err := rollback(tx); err != nil {
			abort = errors.Join(abort, err)
		}
	}
	for _, o := range live {
		if o.err != nil && isCorruption(o.err) {
			o.err = s.noteCorrupt(o.err)
		}
	}
	if abort != nil {
		abort = s.noteCorrupt(abort)
		// Nothing of this batch is in the database. Ops that failed on
		// their own keep their error (they wrote nothing either way).
		s.log.Error("sqlite store: write batch failed", "ops", len(live), "err", abort)
		for i, o := range live {
			if wrote[i] || o.err == nil {
				o.err = abort
			}
		}
	}
}

// announce publishes what the ops of a committed batch changed.
func (s *Store) announce(ops []*op) {
	var ids []task.ID
	for _, o := range ops {
		if o.err == nil && o.announce {
			ids = append(ids, o.changed...)
		}
	}
	s.hub.publish(ids)
}

// invalidateViews drops from the file's view cache, if it has one, the
// tasks the ops of a batch may have changed (whether they failed or not).
func (s *Store) invalidateViews(ops []*op) {
	c := s.hub.views()
	if c == nil {
		return
	}
	var ids []task.ID
	for _, o := range ops {
		switch o.touch {
		case touchAll:
			c.invalidate(nil, true)
			return
		case touchListed:
			ids = append(ids, o.changed...)
		}
	}
	if len(ids) > 0 {
		c.invalidate(ids, false)
	}
}
