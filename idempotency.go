package mcptask

import (
	"fmt"

	"github.com/mcptask/mcptask/wire"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

// Keys of a tools/call's _meta that carry a client-chosen idempotency key
// (declared in package wire).
const (
	MetaIdempotencyKey = wire.MetaIdempotencyKey
	MetaSEP1686Task    = wire.MetaSEP1686Task
)

// maxIdempotencyKey bounds the length of an idempotency key.
const maxIdempotencyKey = 256

// idempotencyKey returns the idempotency key of a call's _meta, "" if none.
func idempotencyKey(meta map[string]any) (string, error) {
	var key string
	if v, ok := meta[MetaIdempotencyKey]; ok {
		s, ok := v.(string)
		if !ok {
			return "", invalidKey(MetaIdempotencyKey + " must be a string")
		}
		key = s
	} else if v, ok := meta[MetaSEP1686Task]; ok {
		m, _ := v.(map[string]any)
		s, ok := m["taskId"].(string)
		if !ok {
			return "", invalidKey(MetaSEP1686Task + " must be an object with a string taskId")
		}
		key = s
	} else {
		return "", nil
	}
	if key == "" || len(key) > maxIdempotencyKey {
		return "", invalidKey(fmt.Sprintf("an idempotency key must have 1 to %d characters", maxIdempotencyKey))
	}
	return key, nil
}

func invalidKey(msg string) error {
	return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "invalid idempotency key: " + msg}
}
