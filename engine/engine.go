package engine

import (
	"context"
	"encoding/json"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/task"
)

// Work is the work of one task. It returns the task's JSON result, or an
// error: a *task.Error is stored as the task's JSON-RPC error as it is; any
// other error becomes an internal error (-32603). Its context is cancelled
// when the task is cancelled or the engine shuts down.
type Work func(ctx context.Context) (json.RawMessage, error)

// Engine runs tasks. Create one with [New], then call [Engine.Run].
type Engine struct {
	opts   Options
	hooks  Hooks // see SetHooks
	hooked bool  // SetHooks was called
	store  store.Store
	timed  store.Store  // store, its calls traced and told to the observer if the engine has them (see wrapStore)
	tracer *storeTracer // makes the store spans; nil when the engine does not trace
	log    *slog.Logger
	now    func() time.Time
	id     string
	policy task.Policy

	feedLive atomic.Bool // the store's change feed is in effect (ChangesAnnounced)

	mu     sync.Mutex
	runs   map[task.ID]*run
	closed bool
	// failing holds the tasks whose outcome write fails, and
	// lastWriteErr the last such failure (see Health).
	failing      map[task.ID]error
	lastWriteErr error
	base         context.Context // canceled when the background services stop
	stop         context.CancelFunc
	watch        watchers
	wg           sync.WaitGroup // running work
	bg           sync.WaitGroup // background services and their goroutines
	bgStopped    bool           // Shutdown is waiting for bg: no more Add
	started      bool
	queues       map[string]int // declared concurrency queues and their caps
	queueKick    chan struct{}  // asks the queue service for a round
	// waitingWork holds the work given to Start for the tasks that this
	// engine created waiting in their queue, to run it if this engine
	// starts them (any other engine builds it with WorkOf). Bounded by
	// maxWaitingWork; an entry goes when its task starts, or changes
	// elsewhere (started or ended by another engine).
	waitingWork map[task.ID]waitingRun
}

// waitingRun is the work given to Start for a task created waiting, and
// the context (the creating request's values, without its cancellation)
// it runs in.
type waitingRun struct {
	work Work
	ctx  context.Context
}

// maxWaitingWork bounds Engine.waitingWork: beyond it, a waiting task's
// work is built by WorkOf when it starts, as on any other engine.
const maxWaitingWork = 10000

// run is the in-process state of one task's running work.
type run struct {
	id     task.ID
	tool   string
	ctx    context.Context
	cancel context.CancelCauseFunc

	mu   sync.Mutex
	wake chan struct{} // closed and replaced to wake input waiters

	// waiting counts the RequestInput calls of the work that wait for the
	// client: such work cannot progress on its own, so Shutdown stops it
	// at once instead of waiting for it.
	waiting atomic.Int32
	// returned is set once the work has returned: there is nothing left
	// to stop (its outcome is being recorded, and the write itself sees
	// whether the task ended elsewhere meanwhile).
	returned atomic.Bool

	// refOnce closes refDone once the work recorded its external
	// reference (Handle.SetExternalRef) or returned: what a Start with
	// StartSpec.AwaitExternalRef waits for.
	refOnce sync.Once
	refDone chan struct{}

	// logs holds the lines the work logged until they are written.
	logs *logBuffer

	// pending is set for a run whose work started before its task was
	// created (see Options.FinishWithin); nil otherwise.
	pending *pendingCreate
	// recorded is closed once the run's outcome is recorded (or dropped),
	// final then holding the task as recorded (nil if it was not).
	recorded chan struct{}
	final    atomic.Pointer[task.Task]
}

// refSettled notes that the work recorded its external reference, or
// returned without one.
func (r *run) refSettled() { r.refOnce.Do(func() { close(r.refDone) }) }

func (r *run) waitChan() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.wake
}

func (r *run) signal() {
	r.mu.Lock()
	close(r.wake)
	r.wake = make(chan struct{})
	r.mu.Unlock()
}
