package engine

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/mcptask/mcptask/audit"
	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/task"
)

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
	// defaultSweepInterval (one minute); negative disables sweeping.
	SweepInterval time.Duration
	// SweepTimeout bounds each sweep. Zero means defaultSweepTimeout (30 s).
	SweepTimeout time.Duration
	// InputPollInterval is how often work waiting for client input re-reads
	// the store, in case an answer arrived without a local wake-up (e.g.
	// through another process). Zero means defaultInputPollInterval (2 s).
	InputPollInterval time.Duration
	// Lease is how long an engine holds a task's work without renewing
	// it. Running engines renew their leases every HeartbeatInterval; an
	// engine that dies loses them, and another engine on the same store
	// takes the tasks over (by Hooks.Recover) about one Lease later. Zero means
	// defaultLease (15 s).
	Lease time.Duration
	// HeartbeatInterval is how often the engine renews the leases of its
	// running work (and stops the work of tasks that ended elsewhere or
	// were taken over, when no change feed said so). It must be shorter
	// than Lease. Zero means Lease/3.
	HeartbeatInterval time.Duration
	// HeartbeatTimeout bounds each renewal; keep it well below Lease.
	// Zero means defaultHeartbeatTimeout (5 s).
	HeartbeatTimeout time.Duration
	// ClaimInterval is how often the engine looks for tasks whose lease
	// expired, to take them over (an Exclusive engine: its own tasks left
	// with no work running). Zero means Lease/3.
	ClaimInterval time.Duration
	// ClaimTimeout bounds each round of takeover (the store's Claim and
	// the resolution of the tasks it took), and each write that fails a
	// task whose outcome is unknown (also at shutdown). Zero means
	// defaultClaimTimeout (10 s).
	ClaimTimeout time.Duration
	// FeedRetryInterval is how long the engine waits before following the
	// store's change feed again after it failed. Zero means
	// defaultFeedRetryInterval (1 s).
	FeedRetryInterval time.Duration
	// FeedCheckTimeout bounds each read of a task announced by the change
	// feed. Zero means defaultFeedCheckTimeout (5 s).
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
	// crash-looping the server. Zero means defaultMaxAttempts (3).
	MaxAttempts int64
	// QueueInterval is how often the engine looks for waiting tasks that
	// can start, besides at once when a task of a queue ends here or a
	// change is announced by the store's change feed. Zero means
	// defaultQueueInterval (1 s).
	QueueInterval time.Duration
	// QueueTimeout bounds each round of the queue service. Zero means
	// defaultQueueTimeout (10 s).
	QueueTimeout time.Duration
	// ReconcileTimeout bounds each call of Hooks.Reconcile. Zero means
	// defaultReconcileTimeout (30 s).
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
	// logged meanwhile, in one write. Zero means defaultLogFlushInterval (200 ms).
	LogFlushInterval time.Duration
	// LogFlushLines is how many waiting lines start a write at once.
	// Zero means defaultLogFlushLines (256).
	LogFlushLines int
	// LogWriteTimeout bounds each write of logged lines. Zero means
	// defaultLogWriteTimeout (5 s).
	LogWriteTimeout time.Duration
	// Now returns the current time. Nil means time.Now.
	Now func() time.Time
	// Observer is told of task events (created, finished, queue waits,
	// takeovers), of the engine's store calls and change-feed reconnects
	// and, through [Engine.Observer], of the server's tasks/* requests,
	// e.g. to count them as Prometheus metrics (see package metrics). Nil
	// observes nothing.
	Observer Observer
}

// withDefaults replaces o's zero fields by their defaults, and checks
// that the heartbeat renews leases before they lapse.
func (o *Options) withDefaults() error {
	if o.MaxResultBytes <= 0 {
		o.MaxResultBytes = defaultMaxResultBytes
	}
	if o.InputPollInterval <= 0 {
		o.InputPollInterval = defaultInputPollInterval
	}
	if o.FinishWithin == 0 {
		o.FinishWithin = DefaultFinishWithin
	}
	if o.Lease <= 0 {
		o.Lease = defaultLease
	}
	if o.MaxAttempts <= 0 {
		o.MaxAttempts = defaultMaxAttempts
	}
	if o.LedgerRetention == 0 {
		o.LedgerRetention = DefaultLedgerRetention
	}
	if o.SweepInterval == 0 {
		o.SweepInterval = defaultSweepInterval
	}
	for _, d := range []struct {
		opt *time.Duration
		def time.Duration
	}{
		{&o.HeartbeatInterval, o.Lease / 3},
		{&o.HeartbeatTimeout, defaultHeartbeatTimeout},
		{&o.ClaimInterval, o.Lease / 3},
		{&o.ClaimTimeout, defaultClaimTimeout},
		{&o.SweepTimeout, defaultSweepTimeout},
		{&o.FeedRetryInterval, defaultFeedRetryInterval},
		{&o.FeedCheckTimeout, defaultFeedCheckTimeout},
		{&o.QueueInterval, defaultQueueInterval},
		{&o.QueueTimeout, defaultQueueTimeout},
		{&o.ReconcileTimeout, defaultReconcileTimeout},
		{&o.LogFlushInterval, defaultLogFlushInterval},
		{&o.LogWriteTimeout, defaultLogWriteTimeout},
	} {
		if *d.opt <= 0 {
			*d.opt = d.def
		}
	}
	if o.LogFlushLines <= 0 {
		o.LogFlushLines = defaultLogFlushLines
	}
	if o.HeartbeatInterval >= o.Lease {
		return fmt.Errorf("engine: Options.HeartbeatInterval %v is not shorter than the Lease %v: leases would lapse between renewals", o.HeartbeatInterval, o.Lease)
	}
	return nil
}

// defaultMaxResultBytes is the result cap used when Options.MaxResultBytes is zero.
const defaultMaxResultBytes = 4 << 20

// Defaults of the [Options] of the engine's leases and background
// services, used when the option is zero.
const (
	// defaultLease is the default of Options.Lease.
	defaultLease = 15 * time.Second
	// defaultHeartbeatTimeout bounds each renewal of the leases of the
	// work running on an engine (one Heartbeat of the store, and the reads
	// of the tasks it reports lost).
	defaultHeartbeatTimeout = 5 * time.Second
	// defaultClaimTimeout bounds each round of taking over the tasks whose
	// lease expired: the Claim, and the resolution of the tasks it took.
	defaultClaimTimeout = 10 * time.Second
	// defaultSweepInterval is the default of Options.SweepInterval.
	defaultSweepInterval = time.Minute
	// defaultSweepTimeout bounds each sweep of expired tasks.
	defaultSweepTimeout = 30 * time.Second
	// defaultFeedRetryInterval is how long the change-feed follower waits
	// before following the feed again after it failed (e.g. a lost
	// connection).
	defaultFeedRetryInterval = time.Second
	// defaultFeedCheckTimeout bounds each read of a task announced by the
	// change feed (to see whether it ended elsewhere).
	defaultFeedCheckTimeout = 5 * time.Second
	// defaultInputPollInterval is the default of Options.InputPollInterval.
	defaultInputPollInterval = 2 * time.Second
	// defaultMaxAttempts is the default of Options.MaxAttempts.
	defaultMaxAttempts = 3
)

// DefaultFinishWithin is the default of Options.FinishWithin.
const DefaultFinishWithin = 5 * time.Millisecond

// The defaults of the ledger's options.
const (
	// DefaultLedgerRetention is the default of Options.LedgerRetention:
	// the ledger keeps an operation 30 days after its last change,
	// whatever happened to its task.
	DefaultLedgerRetention = 30 * 24 * time.Hour
	// defaultReconcileTimeout is the default of Options.ReconcileTimeout.
	defaultReconcileTimeout = 30 * time.Second
)

// The defaults of the task log options (see [Options]).
const (
	// defaultLogFlushInterval is how long a logged line waits in memory,
	// at most, before it is written to the store with the lines logged
	// meanwhile.
	defaultLogFlushInterval = 200 * time.Millisecond
	// defaultLogFlushLines is how many waiting lines start a write at
	// once.
	defaultLogFlushLines = 256
	// defaultLogWriteTimeout bounds each write of logged lines.
	defaultLogWriteTimeout = 5 * time.Second
)

// Defaults of the queue service.
const (
	// defaultQueueInterval is the default of Options.QueueInterval: how
	// often the engine looks, besides when it is told of a change, for
	// waiting tasks that can start.
	defaultQueueInterval = time.Second
	// defaultQueueTimeout bounds each round of the queue service (one
	// StartQueued per queue, and the launch of what it started).
	defaultQueueTimeout = 10 * time.Second
)
