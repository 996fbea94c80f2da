package store

import (
	"context"
	"errors"
	"time"

	"github.com/mcptask/mcptask/task"
)

// ErrNoOperation is returned for an operation key the ledger does not hold.
var ErrNoOperation = errors.New("no such operation")

// Ledger is the facet of [Store] by which stores keep the domain operation ledger
// (see task.Operation) beside the tasks: the evidence of what a task's
// work did downstream, kept for its own retention, whatever happens to the
// task (its expiry or deletion deletes the task, never its operations).
type Ledger interface {
	// RecordOperation durably inserts op (State intended, or what op
	// says) unless the ledger already holds an operation with its Key; it
	// returns the operation as stored (the existing one on a re-run).
	RecordOperation(ctx context.Context, op *task.Operation) (*task.Operation, error)

	// UpdateOperation reads the operation with key, calls fn with it and
	// writes back what fn left in it, atomically, as Store.Update does
	// for tasks; ErrNoOperation for an unknown key. fn must not change
	// the key.
	UpdateOperation(ctx context.Context, key string, fn func(op *task.Operation) error) (*task.Operation, error)

	// Operations returns a page of the operations q selects, newest
	// first, and the cursor of the next page ("" when there is none).
	Operations(ctx context.Context, q OperationQuery) (ops []*task.Operation, next string, err error)

	// DeleteOperations deletes the operations last updated before
	// before (the ledger's retention) and returns how many it deleted.
	DeleteOperations(ctx context.Context, before time.Time) (int, error)
}

// OperationQuery selects operations. Zero fields select everything.
type OperationQuery struct {
	// Owner, if set, selects the operations of that owner only.
	Owner task.Owner
	// TaskID, if set, selects the operations of that task only.
	TaskID task.ID
	// State, if set, selects the operations in that state only.
	State task.OpState
	// Cursor continues a listing ("" for the first page).
	Cursor string
	// Limit caps the page; <= 0 means a default of the store's.
	Limit int
}

// The page sizes of Ledger.Operations.
const (
	// DefaultOperationLimit is the page size of a query without a Limit.
	DefaultOperationLimit = 100
	// MaxOperationLimit caps a query's Limit.
	MaxOperationLimit = 1000
)

// Scope names what q selects apart from its position, so that a backend
// signs its cursors for one selection: a cursor of another selection is
// refused (ErrBadCursor).
func (q OperationQuery) Scope() string {
	return "owner=" + string(q.Owner) + "\x00task=" + string(q.TaskID) + "\x00state=" + string(q.State)
}

// PageLimit returns q's Limit bounded to (0, MaxOperationLimit], with
// DefaultOperationLimit for none.
func (q OperationQuery) PageLimit() int {
	if q.Limit <= 0 {
		return DefaultOperationLimit
	}
	return min(q.Limit, MaxOperationLimit)
}
