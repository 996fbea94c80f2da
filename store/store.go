// Package store defines the persistence contract of mcptask: [Store],
// what the engine, mcptaskd, the dashboard and metrics need of a backend,
// River-style: one contract, and one capability question. Each backend
// (store/sqlite, store/postgres) lives in its own package and must pass
// the shared suite in store/storetest.
//
// DO NOT IMPLEMENT [Store] outside this module: it grows with the
// product, and only the backends of this module are kept passing
// storetest. A store of another module wraps one of them instead (a
// test double embeds a real backend and overrides a method or two).
//
// The contract is the core (create, read, update, list, claim, heartbeat,
// retention) and the facets it embeds, each an interface of its own so
// that a caller can say which part it uses, and who needs them (this is
// the one place that says so):
//
//   - Operations: [Pinger] (mcptaskd's /healthz), [ErrorClassifier] (the
//     engine retries transient writes of running work), [Systemer] (the
//     engine's store spans).
//   - Work: [Queuer] (the engine's concurrency queues; metrics' waiting
//     gauge), [Ledger] (the engine's operation ledger and
//     reconciliation), [TaskLogs] (the engine's task logs, the log
//     resource), [Deleter] (the engine's tasks/delete), [Viewer] (the
//     engine's tasks/get in one read).
//   - Operators: [Browser] (the dashboard), [Historian] (the dashboard's
//     task history), [Counter] (metrics' unfinished-task gauges),
//     [Controls] (the fleet's switches: drains, canaries, rollbacks).
//   - Capability: [ChangeFeed], the one facet a backend may lack, asked
//     for with a type assertion (engines then learn of other instances'
//     changes at their next heartbeat). Both backends of this module
//     have it.
package store

import (
	"context"
	"errors"
	"time"

	"github.com/mcptask/mcptask/task"
)

// ErrNotFound is returned when no task has the given ID.
var ErrNotFound = errors.New("task not found")

// ErrExists is returned by Create when a task with the same ID exists.
var ErrExists = errors.New("task already exists")

// ErrTooManyActive is returned by Create with a quota
// (CreateOptions.MaxActive) when the task's owner already has as many
// non-terminal tasks as the quota allows.
var ErrTooManyActive = errors.New("too many unfinished tasks")

// Store persists tasks: everything the product needs of a backend (see
// the package doc for who needs which facet). Implementations must be
// safe for concurrent use. Every method that returns nil has made its
// change durable: a task is committed before Create returns, so a
// following Get (from any connection or process) finds it.
//
// Backends may offer more (e.g. listing every unfinished task, for their
// own tools and tests) outside this interface; [ChangeFeed] is the one
// capability asked for by type assertion.
type Store interface {
	Queuer
	Ledger
	TaskLogs
	Viewer
	Deleter
	Browser
	Historian
	Counter
	Pinger
	ErrorClassifier
	Systemer
	Events
	Controls

	// Create durably inserts t, under the conditions of opts (see
	// [CreateOptions]; the zero value sets none). It returns ErrExists if
	// t.ID is taken.
	//
	// Idempotency is by t.IdempotencyKey: if it is set and t.Owner
	// already has a task with that key (whatever its status), Create
	// inserts nothing and returns a *DuplicateError holding that task as
	// it is now, whatever the quota.
	Create(ctx context.Context, t *task.Task, opts CreateOptions) error

	// Get returns the task with the given ID, or ErrNotFound. It returns
	// tasks whatever their expiry; callers decide what expired means.
	Get(ctx context.Context, id task.ID) (*task.Task, error)

	// GetByKey returns the task created with the idempotency key key (not
	// empty) by owner, in owner's key scope (task.Owner.KeyScope), or
	// ErrNotFound: what an idempotent retry of the call would find.
	GetByKey(ctx context.Context, owner task.Owner, key string) (*task.Task, error)

	// Update reads the task with the given ID, calls fn with it, and writes
	// back what fn left in it, atomically: no other Update of the same task
	// interleaves. If fn returns an error nothing is written and that error
	// is returned. Update returns ErrNotFound for an unknown ID. fn must not
	// change the task's ID.
	Update(ctx context.Context, id task.ID, fn func(t *task.Task) error) (*task.Task, error)

	// List returns up to limit tasks of owner, newest first, starting after
	// the position encoded in cursor ("" for the first page). next is ""
	// when there are no more tasks. Cursors are opaque to callers.
	List(ctx context.Context, owner task.Owner, cursor string, limit int) (tasks []*task.Task, next string, err error)

	// Claim atomically takes over non-terminal tasks for an engine (see
	// ClaimRequest) and returns them as they are after the claim: Runner
	// set to the claimer and LeaseExpiresAt to Now+Lease. Two concurrent
	// claimers never get the same task (on PostgreSQL: FOR UPDATE SKIP
	// LOCKED). The engine calls it at start-up to resolve the tasks left
	// behind by a process that died, and then to take over the tasks
	// whose lease expired.
	Claim(ctx context.Context, req ClaimRequest) ([]*task.Task, error)

	// Heartbeat extends to until the leases of those tasks among ids that
	// runner still holds and that are not terminal, and returns the other
	// ids (taken over by another engine, ended, e.g. cancelled, or gone):
	// the runner must stop their work.
	Heartbeat(ctx context.Context, runner string, ids []task.ID, until time.Time) (lost []task.ID, err error)

	// DeleteExpired deletes the terminal tasks whose retention ended before
	// now (see task.Task.ExpiresAt) and returns how many it deleted. The
	// children of a task that has not ended are kept (a re-run of its
	// work must find the steps it finished), until it has.
	DeleteExpired(ctx context.Context, now time.Time) (int, error)

	// Close releases the store's resources.
	Close() error
}

// CreateOptions are the conditions under which [Store.Create] inserts a
// task. The zero value sets none. (Idempotency needs no option: it is
// t.IdempotencyKey, stored with the task; see Store.Create.)
type CreateOptions struct {
	// MaxActive, if positive, is a quota on unfinished work: when t.Owner
	// already has MaxActive or more non-terminal tasks (working or
	// input_required), Create inserts nothing and returns
	// ErrTooManyActive. An idempotent retry is answered with its
	// *DuplicateError whatever the count. The count and the insert are
	// atomic with respect to every other Create with a quota for the same
	// owner, in any process sharing the store, so concurrent creations
	// never overshoot the quota. Zero or negative means no quota.
	MaxActive int

	// MaxConcurrent, if positive, is the cap of the concurrency queue
	// t.Queue (which must then be set, on a store that is a [Queuer]):
	// when fewer than MaxConcurrent of the queue's tasks run (are
	// unfinished and not Queued) and none waits, t is inserted as given
	// and its work may start at once; otherwise t is inserted waiting, and
	// Create sets, in t as in the store, Queued, an empty Runner, no
	// lease, Attempts 0 and the status message task.QueuedMessage(the
	// number of tasks waiting ahead of it). The count and the insert are
	// atomic with respect to every other Create with MaxConcurrent and
	// every [Queuer.StartQueued] of the same queue, in any process sharing
	// the store: the queue's tasks never run more than MaxConcurrent at
	// once (unless the cap is lowered), and they start in turns between
	// their owners (see [Queuer.StartQueued]).
	MaxConcurrent int
}

// Queuer is the facet of [Store] by which stores keep concurrency queues (see
// [CreateOptions.MaxConcurrent]): the tasks of a queue run at most its
// cap at once, across every engine sharing the store; the others wait,
// durably, and start in turns between their owners.
type Queuer interface {
	// StartQueued starts, for req.Runner, waiting tasks of req.Queue
	// while fewer than req.Max of the queue's tasks run, in turn order:
	// the owner with the fewest running tasks of the queue first (each
	// task started counts for the next pick), its oldest waiting task
	// first; between owners with as many, the one whose task the queue
	// started least recently (never, first), then the oldest task (by
	// CreatedAt, then ID). One owner's tasks thus start in creation
	// order, and an owner with many waiting tasks does not hold back
	// another's. It returns the started tasks, in that order, as they are
	// after the start:
	// Queued false, Runner req.Runner, LeaseExpiresAt req.Now+req.Lease,
	// Attempts 1, an empty status message, LastUpdatedAt req.Now. The
	// caller must run their work (or resolve them, like any task it
	// holds). It then sets the status message of the tasks still waiting
	// (the first MaxQueueMessages of them, in turn order) to say how
	// many are ahead.
	// Each started task is announced on the store's change feed. It is
	// atomic with respect to Create with MaxConcurrent and every other
	// StartQueued of the queue, in every process sharing the store.
	StartQueued(ctx context.Context, req QueueRequest) ([]*task.Task, error)

	// WaitingQueues returns the names of the queues that have waiting
	// tasks, and how many wait in each.
	WaitingQueues(ctx context.Context) (map[string]int, error)
}

// MaxQueueMessages bounds how many waiting tasks of a queue have their
// status message ("queued: N ahead") refreshed when tasks leave it: the
// head of a long queue is kept exact, a task further back shows the count
// it was last given (a task of another owner enqueued later may take its
// turn before it).
const MaxQueueMessages = 20

// QueueRequest says which tasks StartQueued starts.
type QueueRequest struct {
	// Runner is the starting engine's instance ID.
	Runner string
	// Queue names the queue.
	Queue string
	// Max is the queue's cap on running tasks.
	Max int
	// Now is the start time.
	Now time.Time
	// Lease is the length of the started tasks' lease.
	Lease time.Duration
}

// ClaimRequest says which tasks Claim takes over.
type ClaimRequest struct {
	// Runner is the claiming engine's instance ID.
	Runner string
	// Now is the claim time: tasks whose LeaseExpiresAt is before Now
	// (zero included) are claimable.
	Now time.Time
	// Lease is the length of the new lease.
	Lease time.Duration
	// Limit caps the number of tasks claimed; <= 0 means no cap.
	Limit int
	// IgnoreLeases claims every non-terminal task not held by Runner,
	// whatever its lease: for an engine starting on a store that it owns
	// exclusively (one process per SQLite file), where every unfinished
	// task was left by a process that is gone.
	IgnoreLeases bool
}

// DuplicateError is returned by Create when t.IdempotencyKey is set and
// the same owner already has a task with that key; Task is that task.
type DuplicateError struct {
	Task *task.Task
}

// Error names the existing task.
func (e *DuplicateError) Error() string {
	return "a task with this idempotency key exists: " + string(e.Task.ID)
}

// ChangeFeed is implemented by stores that announce task changes to the
// engines sharing them (PostgreSQL: LISTEN/NOTIFY, sent in the same
// transaction as the change, to every process; SQLite: within the process,
// which is the whole story with one mcptaskd per file). Engines use it to
// deliver cancellation and client input to work running on another engine
// promptly; they poll as a fallback.
type ChangeFeed interface {
	// Changes calls fn with the ID of every task updated (or claimed)
	// through any store sharing this one's tasks, until ctx is done or the
	// feed fails; it then returns the reason. It calls ready (if not nil)
	// once the feed is in effect: every change committed after that is
	// announced. Creations are not announced: nobody waits for a task that
	// does not exist yet. An ID may be announced more than once. fn must be
	// quick. Changes may be called again after it returned (e.g. after a
	// lost connection); announcements made meanwhile are lost, which the
	// callers' polling covers.
	Changes(ctx context.Context, ready func(), fn func(task.ID)) error
}

// Pinger is the facet of [Store] by which stores can tell cheaply whether they can
// serve requests now (e.g. for a health check).
type Pinger interface {
	// Ping returns nil if the store answered a trivial request, or the
	// reason it could not (closed, database unreachable, ctx done).
	Ping(ctx context.Context) error
}

// ErrorClassifier is the facet of [Store] by which stores can tell a transient
// failure from a lasting one. The engine tries the writes of running work
// again, backing off within the lease period, when they fail transiently,
// instead of failing the work on a database restart.
type ErrorClassifier interface {
	// Transient reports whether err, returned by one of the store's
	// methods, is transient: the database was briefly unreachable (a
	// restart, a dropped connection, a failover) or the transaction lost a
	// conflict (a serialization failure, a deadlock, a busy file), so the
	// same call may succeed if made again. The call may or may not have
	// taken effect (a commit whose answer was lost): whoever makes it again
	// must make that harmless. Errors of the caller (ErrNotFound, the
	// errors of an Update function, a done context) are never transient.
	Transient(err error) bool
}

// Deleter is the facet of [Store] by which stores delete one task on request (the
// owner's tasks/delete): both backends are.
type Deleter interface {
	// Delete durably removes the task with the given ID and everything
	// it holds (result, error, input requests and answers), or returns
	// ErrNotFound. It deletes the task and its [TaskLogs] log, in one
	// transaction; a [Ledger]'s operations of the task stay, for their
	// own retention. The deletion is announced
	// on the store's [ChangeFeed], if it has one, so that whoever waits
	// for the task finds it gone. Content a backend cannot erase at once
	// (e.g. PostgreSQL's dead rows until VACUUM) is the backend's to
	// document.
	Delete(ctx context.Context, id task.ID) error
}

// ErrBadCursor is returned by List for a cursor it did not issue.
var ErrBadCursor = errors.New("invalid cursor")

// Counter is the facet of [Store] by which stores count their unfinished tasks
// cheaply (e.g. for metrics computed when they are scraped, which then
// hold across restarts and across every instance sharing the store).
type Counter interface {
	// CountActive returns how many non-terminal tasks (working or
	// input_required) the store holds, by tool, status and whether they
	// wait in a concurrency queue. Groups with no task are left out.
	CountActive(ctx context.Context) ([]ActiveCount, error)
}

// ActiveCount is one group of [Counter.CountActive].
type ActiveCount struct {
	// Tool and Status are the tasks' tool and status.
	Tool   string
	Status task.Status
	// Queued says the tasks wait in their concurrency queue.
	Queued bool
	// N is how many tasks the group holds.
	N int
}

// Systemer is the facet of [Store] by which stores name their database system, as
// OpenTelemetry's db.system.name attribute spells it ("sqlite",
// "postgresql"): the engine's store spans carry it.
type Systemer interface {
	// DBSystem returns the name of the store's database system.
	DBSystem() string
}
