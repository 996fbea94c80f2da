package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mcptask/mcptask/audit"
	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/task"
	"go.opentelemetry.io/otel/trace"
)

// Work is the work of one task. It returns the task's JSON result, or an
// error: a *task.Error is stored as the task's JSON-RPC error as it is; any
// other error becomes an internal error (-32603). Its context is cancelled
// when the task is cancelled or the engine shuts down.
type Work func(ctx context.Context) (json.RawMessage, error)

// Options configures an [Engine]. Only Store is required.
type Options struct {
	// Store persists tasks.
	Store store.Store
	// Policy sets retention and polling.
	Policy task.Policy
	// MaxResultBytes caps the size of a stored result; a larger result
	// fails the task with a clear error. Zero means 4 MiB.
	MaxResultBytes int
	// Logger receives task lifecycle records. Nil means slog.Default().
	Logger *slog.Logger
	// Audit receives the audit trail of the changes this engine makes:
	// tasks created (or reused by an idempotent retry), status changes
	// and cancellations. Nil writes none.
	Audit *audit.Logger
	// InstanceID names this engine in Task.Runner. Empty means a random ID.
	InstanceID string
	// SweepInterval is how often expired tasks are deleted. Zero means
	// DefaultSweepInterval (one minute); negative disables sweeping.
	SweepInterval time.Duration
	// SweepTimeout bounds each sweep. Zero means DefaultSweepTimeout.
	SweepTimeout time.Duration
	// InputPollInterval is how often work waiting for client input re-reads
	// the store, in case an answer arrived without a local wake-up (e.g.
	// through another process). Zero means DefaultInputPollInterval (2 s).
	InputPollInterval time.Duration
	// Recover decides the fate of a task found non-terminal at start-up
	// (left behind by a process that died). It returns the work to re-run
	// the task, or nil to fail it with an "outcome unknown" error. A nil
	// Recover fails every such task: a tool with side effects is never
	// silently run twice.
	Recover func(ctx context.Context, t *task.Task) Work
	// Lease is how long an engine holds a task's work without renewing
	// it. Running engines renew their leases every HeartbeatInterval; an
	// engine that dies loses them, and another engine on the same store
	// takes the tasks over (by Recover) about one Lease later. Zero means
	// DefaultLease (15 s).
	Lease time.Duration
	// HeartbeatInterval is how often the engine renews the leases of its
	// running work (and stops the work of tasks that ended elsewhere or
	// were taken over, when no change feed said so). It must be shorter
	// than Lease. Zero means Lease/3.
	HeartbeatInterval time.Duration
	// HeartbeatTimeout bounds each renewal; keep it well below Lease.
	// Zero means DefaultHeartbeatTimeout.
	HeartbeatTimeout time.Duration
	// ClaimInterval is how often the engine looks for tasks whose lease
	// expired, to take them over (an Exclusive engine: its own tasks left
	// with no work running). Zero means Lease/3.
	ClaimInterval time.Duration
	// ClaimTimeout bounds each round of takeover (the store's Claim and
	// the resolution of the tasks it took), and each write that fails a
	// task whose outcome is unknown (also at shutdown). Zero means
	// DefaultClaimTimeout.
	ClaimTimeout time.Duration
	// FeedRetryInterval is how long the engine waits before following the
	// store's change feed again after it failed. Zero means
	// DefaultFeedRetryInterval.
	FeedRetryInterval time.Duration
	// FeedCheckTimeout bounds each read of a task announced by the change
	// feed. Zero means DefaultFeedCheckTimeout.
	FeedCheckTimeout time.Duration
	// FinishWithin is how long Start waits for work that ends quickly: a
	// task whose work returns within it is answered already terminal
	// (completed or failed), its outcome committed before Start returns,
	// so that its requester needs no poll. When nothing else stands in
	// the way (no idempotency key, which must be found taken before any
	// work runs; no concurrency queue; no cap on the requester's
	// unfinished tasks; no awaited external reference; no write by the
	// work before it returns), the task is created with its outcome in
	// one durable write; otherwise it is created first, and its outcome
	// written as usual. Work still running at the end of the window goes on as the
	// task's work in the background. Zero means DefaultFinishWithin;
	// negative turns it off (Start returns as soon as the task is
	// committed).
	FinishWithin time.Duration
	// Exclusive says this engine is the only one using the store (e.g.
	// one mcptaskd per SQLite file, enforced by a lock): at start-up it
	// takes over every unfinished task at once instead of waiting for
	// leases to expire; later, an expired lease can only be one of its own
	// tasks left with no work running.
	Exclusive bool
	// MaxAttempts bounds how often a task's work is started: a re-runnable
	// task whose runs keep being cut short (e.g. the tool crashes the
	// process) fails once it has started this many times, instead of
	// crash-looping the server. Zero means DefaultMaxAttempts (3).
	MaxAttempts int64
	// WorkOf returns the work of a stored task whose work starts after
	// the request that created it has ended: a task that waited in its
	// concurrency queue (see [Engine.SetQueue]), started by whichever
	// engine sharing the store finds a free slot. It returns nil when it
	// cannot (the task then fails, saying so).
	WorkOf func(ctx context.Context, t *task.Task) Work
	// QueueInterval is how often the engine looks for waiting tasks that
	// can start, besides at once when a task of a queue ends here or a
	// change is announced by the store's change feed. Zero means
	// DefaultQueueInterval.
	QueueInterval time.Duration
	// QueueTimeout bounds each round of the queue service. Zero means
	// DefaultQueueTimeout.
	QueueTimeout time.Duration
	// Hold, if set, reports whether the waiting tasks of a queue must not
	// start on this engine now (e.g. the operator drained its tools):
	// they stay waiting, in order, until Hold says otherwise (call
	// [Engine.KickQueues] then) or another engine starts them.
	Hold func(queue string) bool
	// Reconcile, if set, asks the system of record about an operation a
	// task found unfinished (after a crash, a restart or a takeover)
	// recorded on the ledger and left unsettled, before the recovery
	// policy: confirmed completes the task (its result says it was
	// reconciled), rejected runs it again (by Recover, or WorkOf for a
	// tool not declared re-runnable), anything else fails it "outcome
	// unknown" and leaves the operation unknown for an operator. Tasks
	// without unsettled operations keep the recovery policy.
	Reconcile ReconcileFunc
	// ReconcileTimeout bounds each call of Reconcile. Zero means
	// DefaultReconcileTimeout.
	ReconcileTimeout time.Duration
	// LedgerRetention is how long the operation ledger (store.Ledger)
	// keeps an operation after its last change, whatever happened to its
	// task; the sweeper deletes older ones. Zero means
	// DefaultLedgerRetention (30 days); negative keeps them for ever.
	LedgerRetention time.Duration
	// LogLimits caps each task's log (when the store is a
	// store.TaskLogs): lines, bytes, one line's length. Zero fields mean
	// the store package's defaults (store.DefaultLogMaxLines, ...).
	LogLimits store.LogLimits
	// LogFlushInterval is how long a line the work logs (Handle.Log)
	// waits in memory at most before it is written, with the lines
	// logged meanwhile, in one write. Zero means DefaultLogFlushInterval.
	LogFlushInterval time.Duration
	// LogFlushLines is how many waiting lines start a write at once.
	// Zero means DefaultLogFlushLines.
	LogFlushLines int
	// LogWriteTimeout bounds each write of logged lines. Zero means
	// DefaultLogWriteTimeout.
	LogWriteTimeout time.Duration
	// Now returns the current time. Nil means time.Now.
	Now func() time.Time
	// Observer is told of task events (created, finished, queue waits,
	// takeovers), of the engine's store calls and change-feed reconnects
	// and, through [Engine.Observer], of the server's tasks/* requests,
	// e.g. to count them as Prometheus metrics (see package metrics). Nil
	// observes nothing.
	Observer Observer
	// TracerProvider, if set, receives an OpenTelemetry span for the
	// engine's store operations (mcptask.store.<op>, see
	// docs/tracing.md): those made for a request or a task's work when
	// the caller's context is in a trace, as children of the caller's
	// span, and the background ones (claim, heartbeat, delete_expired,
	// start_queued) as roots. Nil makes none, at no cost: the store is
	// then called directly. mcptask.New sets it
	// (Engine.SetTracerProvider) from the server's
	// Options.TracerProvider.
	TracerProvider trace.TracerProvider
}

// DefaultMaxResultBytes is the result cap used when Options.MaxResultBytes is zero.
const DefaultMaxResultBytes = 4 << 20

// Errors returned by engine methods.
var (
	// ErrNotFound means no task with that ID is visible to the requester:
	// it does not exist, has expired, or belongs to someone else. It is the
	// store's ErrNotFound: one sentinel for "no such task" in every layer;
	// the engine returns it as a *NotFoundError that also says why.
	ErrNotFound = store.ErrNotFound
	// ErrClosed means the engine is shutting down and accepts no new work.
	ErrClosed = errors.New("engine is shut down")
	// ErrBadCursor means a List cursor was not issued by the store.
	ErrBadCursor = store.ErrBadCursor
	// ErrTooManyActive means Start was refused because the owner already
	// has StartSpec.MaxActive unfinished tasks.
	ErrTooManyActive = store.ErrTooManyActive
)

// NotFoundError is the ErrNotFound of a task the requester may not see,
// with the reason, for the audit trail only: requesters must be answered
// exactly as for an unknown task whatever the reason. errors.Is(err,
// ErrNotFound) holds.
type NotFoundError struct {
	// Reason is audit.ReasonUnknown, audit.ReasonOtherOwner or
	// audit.ReasonExpired.
	Reason string
	// Owner and Tool are the task's, when it exists.
	Owner task.Owner
	Tool  string
}

func (e *NotFoundError) Error() string { return ErrNotFound.Error() }

// Is makes errors.Is(err, ErrNotFound) hold.
func (e *NotFoundError) Is(target error) bool { return target == ErrNotFound }

// TerminalError is returned by operations that need a non-terminal task.
type TerminalError struct{ Status task.Status }

func (e *TerminalError) Error() string {
	return fmt.Sprintf("task is already %s", e.Status)
}

// Engine runs tasks. Create one with [New], then call [Engine.Run].
type Engine struct {
	opts   Options
	store  store.Store
	timed  store.Store  // store, its calls traced and told to the observer if the engine has them (see wrapStore)
	tracer *storeTracer // makes the store spans; nil when the engine does not trace
	log    *slog.Logger
	now    func() time.Time
	id     string
	policy task.Policy

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

	// logs holds the lines the work logged until they are written; nil
	// when the store keeps no logs.
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

// New returns an engine on opts.Store.
func New(opts Options) (*Engine, error) {
	if opts.Store == nil {
		return nil, errors.New("engine: Options.Store is required")
	}
	e := &Engine{
		opts:   opts,
		store:  opts.Store,
		log:    opts.Logger,
		now:    opts.Now,
		id:     opts.InstanceID,
		policy: opts.Policy,
		runs:   map[task.ID]*run{},

		queueKick: make(chan struct{}, 1),
	}
	e.wrapStore()
	if e.log == nil {
		e.log = slog.Default()
	}
	if e.now == nil {
		e.now = time.Now
	}
	if e.id == "" {
		e.id = "engine-" + string(task.NewID())[:12]
	}
	if e.opts.MaxResultBytes <= 0 {
		e.opts.MaxResultBytes = DefaultMaxResultBytes
	}
	o := &e.opts
	if o.InputPollInterval <= 0 {
		o.InputPollInterval = DefaultInputPollInterval
	}
	if o.FinishWithin == 0 {
		o.FinishWithin = DefaultFinishWithin
	}
	if o.Lease <= 0 {
		o.Lease = DefaultLease
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = DefaultMaxAttempts
	}
	if o.LedgerRetention == 0 {
		o.LedgerRetention = DefaultLedgerRetention
	}
	if o.SweepInterval == 0 {
		o.SweepInterval = DefaultSweepInterval
	}
	for _, d := range []struct {
		opt *time.Duration
		def time.Duration
	}{
		{&o.HeartbeatInterval, o.Lease / 3},
		{&o.HeartbeatTimeout, DefaultHeartbeatTimeout},
		{&o.ClaimInterval, o.Lease / 3},
		{&o.ClaimTimeout, DefaultClaimTimeout},
		{&o.SweepTimeout, DefaultSweepTimeout},
		{&o.FeedRetryInterval, DefaultFeedRetryInterval},
		{&o.FeedCheckTimeout, DefaultFeedCheckTimeout},
		{&o.QueueInterval, DefaultQueueInterval},
		{&o.QueueTimeout, DefaultQueueTimeout},
		{&o.ReconcileTimeout, DefaultReconcileTimeout},
		{&o.LogFlushInterval, DefaultLogFlushInterval},
		{&o.LogWriteTimeout, DefaultLogWriteTimeout},
	} {
		if *d.opt <= 0 {
			*d.opt = d.def
		}
	}
	if o.LogFlushLines <= 0 {
		o.LogFlushLines = DefaultLogFlushLines
	}
	if o.HeartbeatInterval >= o.Lease {
		return nil, fmt.Errorf("engine: Options.HeartbeatInterval %v is not shorter than the Lease %v: leases would lapse between renewals", o.HeartbeatInterval, o.Lease)
	}
	e.base, e.stop = context.WithCancel(context.Background())
	return e, nil
}

// SetRecover sets the Recover option (see [Options]) of an engine created
// without one: the adapter that owns the engine's tools (package mcptask)
// installs its policy this way. It is an error to call it after
// [Engine.Run], or on an engine that already has a policy: an engine's
// recovery policy is set once and never silently replaced.
func (e *Engine) SetRecover(fn func(ctx context.Context, t *task.Task) Work) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	switch {
	case e.started:
		return errors.New("engine: SetRecover after Run: the recovery policy must be set before the engine starts")
	case e.opts.Recover != nil:
		return errors.New("engine: the engine already has a recovery policy (Options.Recover, or another server on this engine)")
	case fn == nil:
		return errors.New("engine: SetRecover(nil)")
	}
	e.opts.Recover = fn
	return nil
}

// Attach returns a context for work of the task with the given ID that runs
// outside the engine's own goroutine (e.g. a re-run that goes through a
// server's full request path): it carries the task's [Handle] and is
// cancelled with the task. ok is false if no work of that task runs here.
func (e *Engine) Attach(ctx context.Context, id task.ID) (_ context.Context, cancel context.CancelFunc, ok bool) {
	e.mu.Lock()
	r := e.runs[id]
	e.mu.Unlock()
	if r == nil {
		return ctx, func() {}, false
	}
	ctx, cc := context.WithCancelCause(ctx)
	stop := context.AfterFunc(r.ctx, func() { cc(context.Cause(r.ctx)) })
	return withHandle(ctx, &Handle{e: e, run: r}), func() { stop(); cc(nil) }, true
}

// Policy returns the engine's retention and polling policy.
func (e *Engine) Policy() task.Policy { return e.policy }

// InstanceID returns the name this engine records in Task.Runner.
func (e *Engine) InstanceID() string { return e.id }

// Run resolves the tasks a dead process left non-terminal (by the Recover
// option), then starts the background services, each on a goroutine of
// its own with its own interval and per-call timeout (see [Options]): the
// renewal of leases, the takeover of expired leases,
// the sweeper, and on a store with a change feed the follower of the
// feed. It returns once the feed is in effect (or after 10 s, polling
// covering the changes until it is). Call it once, before serving
// requests.
func (e *Engine) Run(ctx context.Context) error {
	e.mu.Lock()
	if e.started {
		e.mu.Unlock()
		return errors.New("engine: Run called twice")
	}
	e.started = true
	e.mu.Unlock()
	if err := e.claimOrphans(ctx, true); err != nil {
		return err
	}
	e.startUndeclared(ctx)
	e.startService(service{
		interval: e.opts.HeartbeatInterval,
		timeout:  e.opts.HeartbeatTimeout,
		jitter:   true,
		step:     e.heartbeat,
	})
	// An exclusive engine runs the takeover service too: a task of its own
	// whose lease lapsed with no work running for it (its outcome, or its
	// re-run, could not be recorded) is resolved instead of staying
	// unfinished until the next start.
	e.startService(service{
		interval: e.opts.ClaimInterval,
		timeout:  e.opts.ClaimTimeout,
		jitter:   true,
		step:     e.claimExpired,
	})
	if e.opts.SweepInterval > 0 {
		e.startService(service{
			interval: e.opts.SweepInterval,
			timeout:  e.opts.SweepTimeout,
			step: func(ctx context.Context) {
				e.Sweep(ctx)
				e.sweepLedger(ctx)
			},
		})
	}
	if e.hasQueues() {
		// Tasks left waiting by earlier processes start now, if there
		// is room.
		e.kickQueues()
		e.goBackground(e.queueService)
	}
	if feed, ok := e.store.(store.ChangeFeed); ok {
		// Wait (a little) for the feed to be in effect, so that changes
		// other engines make once Run has returned are announced, not
		// left to the heartbeat's polling.
		listening := make(chan struct{})
		if e.goBackground(func() { e.feedLoop(feed, listening) }) {
			select {
			case <-listening:
			case <-ctx.Done():
			case <-time.After(feedStartWait):
				e.log.Warn("the task change feed is not listening yet; until it is, polling covers changes made elsewhere", "waited", feedStartWait)
			}
		}
	}
	return nil
}

// StartSpec describes a task to create.
type StartSpec struct {
	// Owner binds the task to its requester.
	Owner task.Owner
	// Tool names the tool being run.
	Tool string
	// Wire names the protocol revision of the creating request.
	Wire string
	// TTL is the requested retention; nil asks for the default.
	TTL *time.Duration
	// MaxTTL, if positive, caps the retention of this task below the
	// policy's (e.g. a tool whose results hold sensitive data).
	MaxTTL time.Duration
	// Request is the creating call's params, kept for re-runs.
	Request json.RawMessage
	// IdempotencyKey, if set, makes Start return the requester's existing
	// task with that key instead of starting the work again.
	IdempotencyKey string
	// MaxActive, if positive, refuses the task with ErrTooManyActive when
	// Owner already has that many unfinished (working or input_required)
	// tasks in the store, counted atomically with the creation, across
	// every engine sharing the store.
	MaxActive int
	// Queue, if set, names the concurrency queue the task runs in,
	// declared with [Engine.SetQueue]: when the queue is full, the task is
	// created waiting and its work starts later, built by Options.WorkOf
	// (the work given to Start is then not used).
	Queue string
	// AwaitExternalRef, if positive, makes Start return only once the
	// work has recorded its external reference ([Handle.SetExternalRef]),
	// or returned, or this long has passed, or parent is done: the
	// requester's acknowledgement of the task then comes after the
	// reference to the work started elsewhere (an upstream task, a job)
	// is durable, so that a crash after the acknowledgement can always
	// re-attach to it. The task is created (and the work started) as
	// without it; only the answer waits.
	AwaitExternalRef time.Duration
	// Correlation holds the host's correlation keys of the creating call
	// (e.g. "claudecode/toolUseId" → the host's tool-use ID), stored with
	// the task (task.Task.Correlation) and copied to the operations its
	// work records. Nil for none; a map over task.CheckCorrelation's
	// bounds makes Start fail before anything is written.
	Correlation map[string]string
}

// ErrIdempotencyConflict is returned by Start when an idempotency key is
// reused for another call: of another tool, or with other arguments (see
// task.CallDigest).
var ErrIdempotencyConflict = errors.New("the idempotency key was already used for another call (another tool or other arguments)")

// existing returns the task an idempotent retry refers to: the same call
// again. The same key for another call is ErrIdempotencyConflict.
func (e *Engine) existing(t *task.Task, spec StartSpec) (*task.Task, error) {
	if t.Tool != spec.Tool || task.CallDigest(t.Tool, t.Request) != task.CallDigest(spec.Tool, spec.Request) {
		return nil, ErrIdempotencyConflict
	}
	if t.Expired(e.now()) {
		return nil, fmt.Errorf("engine: the task with this idempotency key has expired and is about to be deleted; retry with another key")
	}
	e.log.Info("task reused by an idempotent retry", "task", t.ID, "tool", t.Tool, "owner", t.Owner)
	e.opts.Audit.Reused(context.Background(), audit.TaskOf(t))
	return t, nil
}

// Start creates a task durably and starts its work in the background. It
// returns once the task is committed, so a following Get finds it. The
// work's context keeps parent's values but not its cancellation: the
// request that starts a task may end long before the work does.
func (e *Engine) Start(parent context.Context, spec StartSpec, work Work) (*task.Task, error) {
	if err := task.CheckCorrelation(spec.Correlation); err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	t := task.New(e.policy, spec.Owner, spec.Tool, spec.TTL, e.now())
	t.Wire = spec.Wire
	t.Correlation = task.CloneCorrelation(spec.Correlation)
	if spec.MaxTTL > 0 && t.TTL > spec.MaxTTL {
		t.TTL = spec.MaxTTL
	}
	t.Request = spec.Request
	t.Runner = e.id
	t.LeaseExpiresAt = t.CreatedAt.Add(e.opts.Lease)
	t.Attempts = 1
	t.IdempotencyKey = spec.IdempotencyKey
	// Count the work before creating the task, so that Shutdown, once it
	// has marked the engine closed, waits for every task it let through.
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil, ErrClosed
	}
	e.wg.Add(1)
	e.mu.Unlock()
	if e.opts.FinishWithin > 0 && spec.Queue == "" && spec.AwaitExternalRef <= 0 && spec.MaxActive <= 0 && spec.IdempotencyKey == "" {
		return e.startQuick(parent, t, work)
	}
	opts := store.CreateOptions{MaxActive: spec.MaxActive}
	if spec.Queue != "" {
		max, ok := e.queueCap(spec.Queue)
		if !ok {
			e.wg.Done()
			return nil, fmt.Errorf("%w: %q", ErrNoQueue, spec.Queue)
		}
		t.Queue, opts.MaxConcurrent = spec.Queue, max
	}
	if err := e.timed.Create(store.WithInstance(parent, e.id), t, opts); err != nil {
		e.wg.Done()
		var dup *store.DuplicateError
		if errors.As(err, &dup) {
			return e.existing(dup.Task, spec)
		}
		if errors.Is(err, store.ErrTooManyActive) {
			return nil, ErrTooManyActive
		}
		return nil, fmt.Errorf("engine: creating task: %w", err)
	}
	e.created(parent, t)
	if t.Queued {
		e.mu.Lock()
		if len(e.waitingWork) < maxWaitingWork {
			if e.waitingWork == nil {
				e.waitingWork = map[task.ID]waitingRun{}
			}
			e.waitingWork[t.ID] = waitingRun{work: work, ctx: context.WithoutCancel(parent)}
		}
		e.mu.Unlock()
		e.wg.Done()
		e.log.Info("task waits in its queue", "task", t.ID, "tool", t.Tool, "queue", t.Queue, "status", t.StatusMessage)
		return t.Clone(), nil
	}
	r := e.launch(context.WithoutCancel(parent), t, work)
	if spec.AwaitExternalRef > 0 {
		e.awaitRef(parent, r, spec.AwaitExternalRef)
	}
	if e.opts.FinishWithin > 0 {
		// Created first (a queue, a cap or an awaited reference stood
		// in the way of one write): still answered terminal when the
		// work ends within the window.
		if done := e.awaitOutcome(parent, r, time.Now().Add(e.opts.FinishWithin)); done != nil {
			return done, nil
		}
	}
	return t.Clone(), nil
}

// awaitRef waits until r's work recorded its external reference or
// returned, at most d, and not past parent's end.
func (e *Engine) awaitRef(parent context.Context, r *run, d time.Duration) {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-r.refDone:
	case <-timer.C:
		e.log.Warn("the task is acknowledged before its work recorded its external reference", "task", r.id, "tool", r.tool, "waited", d)
	case <-parent.Done():
	}
}

// launch runs work for t in a new goroutine and returns its run. The
// caller has already counted it in e.wg.
func (e *Engine) launch(parent context.Context, t *task.Task, work Work) *run {
	r, stopOnShutdown := e.register(parent, t)
	e.start(r, stopOnShutdown, work)
	return r
}

// register registers a run of t, so that a cancel, an answer or a feed
// announcement reaches it from now on; start runs its work.
func (e *Engine) register(parent context.Context, t *task.Task) (r *run, stopOnShutdown func() bool) {
	r, stopOnShutdown = e.newRun(parent, t)
	e.mu.Lock()
	e.runs[t.ID] = r
	e.mu.Unlock()
	return r, stopOnShutdown
}

// newRun returns a run of t that nothing reaches yet (see register).
func (e *Engine) newRun(parent context.Context, t *task.Task) (r *run, stopOnShutdown func() bool) {
	ctx, cancel := context.WithCancelCause(parent)
	r = &run{id: t.ID, tool: t.Tool, ctx: ctx, cancel: cancel, wake: make(chan struct{}), refDone: make(chan struct{}), logs: e.newLogBuffer(t.ID), recorded: make(chan struct{})}
	if r.logs != nil {
		r.logs.run = r
	}
	stopOnShutdown = context.AfterFunc(e.base, func() { cancel(errShutdown) })
	return r, stopOnShutdown
}

// unregister drops a registered run whose work will not start, and its
// count in e.wg.
func (e *Engine) unregister(r *run, stopOnShutdown func() bool) {
	stopOnShutdown()
	r.cancel(nil)
	e.mu.Lock()
	delete(e.runs, r.id)
	e.mu.Unlock()
	e.wg.Done()
}

// start runs the work of the registered run r in a new goroutine.
func (e *Engine) start(r *run, stopOnShutdown func() bool, work Work) {
	ctx := r.ctx
	go func() {
		defer e.wg.Done()
		defer stopOnShutdown()
		defer r.cancel(nil)
		h := &Handle{e: e, run: r}
		res, err := e.invoke(withHandle(ctx, h), work)
		if r.logs != nil {
			r.logs.end() // the log is complete before the outcome is (a pending task is created for it first)
		}
		r.returned.Store(true)
		r.refSettled()
		// Decide at once whether shutdown cut the work short, before a
		// shutdown deadline passing later could make a finished run look
		// interrupted.
		interrupted := context.Cause(ctx) == errShutdown || context.Cause(ctx) == errShutdownWaiting
		if p := r.pending; p != nil {
			// Its task may not be created yet: Start decides whether the
			// outcome goes into the task's creation.
			p.outcome <- quickOutcome{res: res, err: err, interrupted: interrupted}
			<-p.decided
			if p.inlined || p.err != nil {
				e.mu.Lock()
				delete(e.runs, r.id)
				e.mu.Unlock()
				close(r.recorded)
				return
			}
		}
		// The run stays registered until its outcome is recorded: its
		// lease is renewed meanwhile, and no takeover starts the work
		// again while a failing write is retried.
		e.finish(ctx, r, interrupted, res, err)
		e.mu.Lock()
		delete(e.runs, r.id)
		e.mu.Unlock()
		close(r.recorded)
	}()
}

var errShutdown = errors.New("engine shut down")

// errShutdownWaiting stops, at shutdown, work that waits for client input.
var errShutdownWaiting = errors.New("engine shut down while the task waited for input")

// isClosed reports whether Shutdown has begun.
func (e *Engine) isClosed() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.closed
}

// invoke calls work, turning a panic into an internal error.
func (e *Engine) invoke(ctx context.Context, work Work) (res json.RawMessage, err error) {
	defer func() {
		if p := recover(); p != nil {
			e.log.Error("task work panicked", "panic", p, "stack", string(debug.Stack()))
			res, err = nil, &task.Error{Code: task.CodeInternalError, Message: fmt.Sprintf("internal error: the tool panicked: %v", p)}
		}
	}()
	return work(ctx)
}

// finish records the outcome of a task's work.
func (e *Engine) finish(ctx context.Context, r *run, interrupted bool, res json.RawMessage, err error) {
	if interrupted {
		// Stopped by shutdown: whatever the work returned (often an
		// error result made of ctx.Err()) says nothing about its outcome.
		e.resolveInterrupted(r, context.Cause(ctx) == errShutdownWaiting)
		return
	}
	terr := e.outcomeError(res, err)
	now := e.now()
	t, uerr := e.recordOutcome(ctx, r, func(t *task.Task) error {
		if t.Runner != e.id && !t.Status.Terminal() {
			return errLost // another engine took the task over
		}
		if terr != nil {
			return t.Fail(terr, terr.Message, now)
		}
		return t.Complete(res, now)
	})
	var te *task.TransitionError
	switch {
	case errors.As(uerr, &te), errors.Is(uerr, errLost):
		// Cancelled (or otherwise ended, or taken over) while the work
		// ran: the stored state stands, the late result is dropped, and
		// said (the work may have had effects the status does not show).
		e.lateResult(ctx, r, terr)
		return
	case uerr != nil:
		e.log.Error("recording task outcome", "task", r.id, "err", uerr)
		return
	case t.Status == task.Failed:
		r.final.Store(t)
		e.log.Info("task failed", "task", t.ID, "tool", t.Tool, "code", t.Error.Code, "message", t.Error.Message)
	default:
		r.final.Store(t)
		e.log.Info("task completed", "task", t.ID, "tool", t.Tool, "resultBytes", len(res))
	}
}

// visible loads a task the requester may see, or returns a *NotFoundError.
func (e *Engine) visible(ctx context.Context, owner task.Owner, id task.ID) (*task.Task, error) {
	t, err := e.timed.Get(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, &NotFoundError{Reason: audit.ReasonUnknown}
	}
	if err != nil {
		return nil, err
	}
	if err := e.denied(t, owner, e.now()); err != nil {
		return nil, err
	}
	return t, nil
}

// denied returns the *NotFoundError that hides t from the requester
// owner, or nil if owner may see t.
func (e *Engine) denied(t *task.Task, owner task.Owner, now time.Time) error {
	switch {
	case !task.MayAccess(t.Owner, owner):
		return &NotFoundError{Reason: audit.ReasonOtherOwner, Owner: t.Owner, Tool: t.Tool}
	case t.Expired(now):
		return &NotFoundError{Reason: audit.ReasonExpired, Owner: t.Owner, Tool: t.Tool}
	}
	return nil
}

// Audit returns the engine's audit trail (see Options.Audit); it may be
// nil, which writes nothing.
func (e *Engine) Audit() *audit.Logger { return e.opts.Audit }

// Get returns the task with the given ID if owner may see it.
func (e *Engine) Get(ctx context.Context, owner task.Owner, id task.ID) (*task.Task, error) {
	return e.visible(ctx, owner, id)
}

// update applies fn to a task the requester may see.
func (e *Engine) update(ctx context.Context, owner task.Owner, id task.ID, fn func(*task.Task) error) (*task.Task, error) {
	now := e.now()
	t, err := e.write(ctx, id, func(t *task.Task) error {
		if err := e.denied(t, owner, now); err != nil {
			return err
		}
		return fn(t)
	})
	var nf *NotFoundError
	switch {
	case errors.As(err, &nf): // denied: the reason stands
		return nil, nf
	case errors.Is(err, store.ErrNotFound):
		return nil, &NotFoundError{Reason: audit.ReasonUnknown}
	}
	return t, err
}

// Cancel moves a task to cancelled and cancels its work's context. The task
// is cancelled in the store before Cancel returns. Cancelling a terminal
// task returns a *TerminalError and the task unchanged.
func (e *Engine) Cancel(ctx context.Context, owner task.Owner, id task.ID) (*task.Task, error) {
	return e.cancel(ctx, owner, id, false)
}

// CancelAsOperator cancels the task with id whoever owns it, as Cancel
// does for its owner, on behalf of the operator by (an admin of an
// operator surface such as the dashboard, who authorized the request
// itself). The audit trail names by as the requester; the task's status
// message says an operator cancelled it. An unknown task gives a
// *NotFoundError, a terminal one a *TerminalError and the task unchanged.
func (e *Engine) CancelAsOperator(ctx context.Context, by task.Owner, id task.ID) (*task.Task, error) {
	return e.cancel(ctx, by, id, true)
}

// The status messages of a cancelled task.
const (
	msgCancelled         = "The task was cancelled by request."
	msgCancelledOperator = "The task was cancelled by an operator."
)

func (e *Engine) cancel(ctx context.Context, owner task.Owner, id task.ID, operator bool) (*task.Task, error) {
	var terminal task.Status
	fn := func(t *task.Task) error {
		if t.Status.Terminal() {
			terminal = t.Status
			return errTerminal
		}
		msg := msgCancelled
		if operator {
			msg = msgCancelledOperator
		}
		return t.Cancel(msg, e.now())
	}
	var (
		t   *task.Task
		err error
	)
	if operator {
		t, err = e.write(ctx, id, fn)
		if errors.Is(err, store.ErrNotFound) {
			err = &NotFoundError{Reason: audit.ReasonUnknown}
		}
	} else {
		t, err = e.update(ctx, owner, id, fn)
	}
	if errors.Is(err, errTerminal) {
		var (
			cur  *task.Task
			gerr error
		)
		if operator {
			cur, gerr = e.timed.Get(ctx, id)
		} else {
			cur, gerr = e.visible(ctx, owner, id)
		}
		if gerr != nil {
			return nil, gerr
		}
		return cur, &TerminalError{Status: terminal}
	}
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	r := e.runs[id]
	delete(e.waitingWork, id)
	e.mu.Unlock()
	if r != nil {
		r.cancel(context.Canceled)
	}
	e.log.Info("task cancelled", "task", t.ID, "tool", t.Tool, "operator", operator)
	e.opts.Audit.Cancelled(ctx, owner, audit.TaskOf(t))
	return t, nil
}

var errTerminal = errors.New("terminal")

// ErrDeleteUnsupported is returned by Delete when the engine's store is no
// [store.Deleter].
var ErrDeleteUnsupported = errors.New("the task store cannot delete tasks")

// NotTerminalError is Delete's refusal of a task that has not ended
// (working or input_required): it must be cancelled first.
type NotTerminalError struct{ Status task.Status }

func (e *NotTerminalError) Error() string {
	return fmt.Sprintf("task is %s: cancel it first, then delete it", e.Status)
}

// Delete deletes a finished task of owner and everything it holds (result,
// error, input requests and answers), and returns the task as it was. A
// task that has not ended is refused with a *NotTerminalError (deletion
// never stops work: the owner cancels first, then deletes); a task owner
// may not see is answered with a *NotFoundError, as by Get. The deletion
// is durable and announced on the store's change feed before Delete
// returns, so that whoever waits for the task, here or on another engine,
// finds it gone. It deletes the task only, never the store's ledger of
// domain operations. It is audited (task.deleted), never with payloads.
func (e *Engine) Delete(ctx context.Context, owner task.Owner, id task.ID) (*task.Task, error) {
	d, ok := e.store.(store.Deleter)
	if !ok {
		return nil, ErrDeleteUnsupported
	}
	t, err := e.visible(ctx, owner, id)
	if err != nil {
		return nil, err
	}
	if !t.Status.Terminal() {
		return nil, &NotTerminalError{Status: t.Status}
	}
	// A terminal task never changes status again: deleting what was read
	// is safe. A deletion in between makes this one unknown.
	if err := e.deleteTask(ctx, d, id); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return nil, &NotFoundError{Reason: audit.ReasonUnknown}
		}
		return nil, err
	}
	e.wakeWatchers(id) // waiters here find it gone (the feed tells the others)
	e.log.Info("task deleted", "task", t.ID, "tool", t.Tool)
	e.opts.Audit.Deleted(ctx, owner, audit.TaskOf(t), string(t.Status))
	return t, nil
}

// AnswerCheck checks a client's answer to one input request of a task
// (the request as the task holds it) before Respond stores it.
type AnswerCheck func(request, answer json.RawMessage) error

// AnswerError is Respond's refusal of an answer that check found bad:
// nothing of that Respond was stored, and the task still waits.
type AnswerError struct {
	Key string // the input request's key
	Err error  // what check said
}

func (e *AnswerError) Error() string { return fmt.Sprintf("the answer to %q: %v", e.Key, e.Err) }

// Unwrap returns what check said.
func (e *AnswerError) Unwrap() error { return e.Err }

// Respond delivers client answers to a task's outstanding input requests.
// Answers for unknown or already answered keys are ignored and listed in
// ignored. check, if not nil, sees each answer to an outstanding request
// first, in the same transaction: if it refuses one, Respond stores
// nothing and returns an *AnswerError. The task's outstanding requests are
// updated before Respond returns, so the next Get shows them.
func (e *Engine) Respond(ctx context.Context, owner task.Owner, id task.ID, responses map[string]json.RawMessage, check AnswerCheck) (t *task.Task, ignored []string, err error) {
	t, err = e.update(ctx, owner, id, func(t *task.Task) error {
		if check != nil {
			for _, key := range slices.Sorted(maps.Keys(responses)) {
				if req, ok := t.InputRequests[key]; ok {
					if err := check(req, responses[key]); err != nil {
						return &AnswerError{Key: key, Err: err}
					}
				}
			}
		}
		var aerr error
		_, ignored, aerr = t.Answer(responses, e.now())
		var te *task.TransitionError
		if errors.As(aerr, &te) {
			return &TerminalError{Status: t.Status}
		}
		return aerr
	})
	if err != nil {
		return nil, nil, err
	}
	e.mu.Lock()
	r := e.runs[id]
	e.mu.Unlock()
	if r != nil {
		r.signal()
	}
	return t, ignored, nil
}

// List returns a page of owner's tasks, newest first. Listing matches the
// owner exactly: an anonymous requester lists only the tasks created under
// its own anonymous scope (e.g. its session).
func (e *Engine) List(ctx context.Context, owner task.Owner, cursor string, limit int) ([]*task.Task, string, error) {
	ts, next, err := e.timed.List(ctx, owner, cursor, limit)
	if err != nil {
		return nil, "", err
	}
	now := e.now()
	out := ts[:0]
	for _, t := range ts {
		if !t.Expired(now) {
			out = append(out, t)
		}
	}
	return out, next, nil
}

// Shutdown stops accepting tasks, waits for running work until ctx is done,
// then cancels what still runs and resolves it by its recovery policy:
// re-runnable work is handed back (left working with no runner, re-run at the
// next start), other work fails with an "outcome unknown" error. It then
// stops the background services. Shutdown returns when every task's work
// has returned, and every store call the engine made in the background
// (each bounded by its per-call timeout, see [Options]) too: once it has
// returned, the caller may close the store.
func (e *Engine) Shutdown(ctx context.Context) error {
	e.mu.Lock()
	e.closed = true
	waiting := make([]*run, 0, len(e.runs))
	for _, r := range e.runs {
		waiting = append(waiting, r)
	}
	e.mu.Unlock()
	// Work waiting for the client cannot finish within the grace: stop it
	// now (RequestInput stops work that starts waiting later).
	for _, r := range waiting {
		if r.waiting.Load() > 0 {
			r.cancel(errShutdownWaiting)
		}
	}
	done := make(chan struct{})
	go func() { e.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		e.stop() // cancels every running work with errShutdown
		select {
		case <-done:
		case <-time.After(shutdownGrace):
			// Work that ignores its context must not leave its task
			// dangling: resolve it now; its late outcome is dropped.
			e.mu.Lock()
			left := make([]*run, 0, len(e.runs))
			for _, r := range e.runs {
				left = append(left, r)
			}
			e.mu.Unlock()
			for _, r := range left {
				e.resolveInterrupted(r, false)
			}
		}
	}
	e.stopBackground()
	return nil
}

// shutdownGrace is how long Shutdown waits for cancelled work to return.
const shutdownGrace = 5 * time.Second

// feedStartWait bounds how long Run waits for the store's change feed to
// be in effect.
const feedStartWait = 10 * time.Second
