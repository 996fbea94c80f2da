package mcptask

import "github.com/mcptask/mcptask/wire"

// Keys of a tools/call's _meta that carry a client-chosen idempotency key:
// a retried call with the same key (from the same requester) returns the
// task the first call created instead of starting the work again, on
// either wire.
const (
	// MetaIdempotencyKey is mcptask's key: a string of 1 to 256
	// characters.
	MetaIdempotencyKey = wire.MetaIdempotencyKey
	// MetaSEP1686Task is the SEP-1686 draft's client-generated task
	// metadata, {"taskId": "..."}; its taskId is taken as the key.
	MetaSEP1686Task = wire.MetaSEP1686Task
)
