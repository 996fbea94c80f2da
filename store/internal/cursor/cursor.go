// Package cursor makes and checks the opaque List cursors of the store
// backends.
//
// A cursor is base64url(version | created_at_ms | id | mac), where mac is a
// truncated HMAC-SHA256, under the store's own random key, of a domain
// string, the owner and the rest. A cursor is therefore valid only for the
// owner and the store that issued it (on any process sharing that store),
// and it survives restarts.
package cursor

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"

	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/task"
)

const (
	version = 1
	macLen  = 16
	minLen  = 1 + 8 + 1 + macLen
)

var encoding = base64.RawURLEncoding.Strict()

// Signer makes and checks cursors under one key.
type Signer struct {
	// Key is the store's secret HMAC key.
	Key []byte
	// Domain separates the cursors of different kinds of store.
	Domain string
}

func (s Signer) mac(owner string, payload []byte) []byte {
	m := hmac.New(sha256.New, s.Key)
	m.Write([]byte(s.Domain))
	m.Write([]byte{0})
	m.Write(binary.BigEndian.AppendUint64(nil, uint64(len(owner))))
	m.Write([]byte(owner))
	m.Write(payload)
	return m.Sum(nil)[:macLen]
}

// Make returns the cursor of the position just after t in owner's listing
// (newest first, by creation time then ID).
func (s Signer) Make(owner task.Owner, t *task.Task) string {
	return s.MakeAt(string(owner), t.CreatedAt.UnixMilli(), string(t.ID))
}

// MakeAt returns the cursor of the position just after (createdMS, id) in
// the listing that scope names (an owner, or a query's filters): such a
// cursor is valid only for the same scope.
func (s Signer) MakeAt(scope string, createdMS int64, id string) string {
	b := make([]byte, 0, minLen+len(id))
	b = append(b, version)
	b = binary.BigEndian.AppendUint64(b, uint64(createdMS))
	b = append(b, id...)
	b = append(b, s.mac(scope, b)...)
	return encoding.EncodeToString(b)
}

// ParseAt checks that c was issued by MakeAt for scope and returns its
// position; any other string gives store.ErrBadCursor. The ID is not
// checked beyond being non-empty.
func (s Signer) ParseAt(scope, c string) (createdMS int64, id string, err error) {
	b, err := encoding.DecodeString(c)
	if err != nil || len(b) < minLen || b[0] != version {
		return 0, "", store.ErrBadCursor
	}
	payload, mac := b[:len(b)-macLen], b[len(b)-macLen:]
	if !hmac.Equal(mac, s.mac(scope, payload)) {
		return 0, "", store.ErrBadCursor
	}
	return int64(binary.BigEndian.Uint64(payload[1:9])), string(payload[9:]), nil
}

// Parse checks that c was issued for owner and returns its position; any
// other string gives store.ErrBadCursor.
func (s Signer) Parse(owner task.Owner, c string) (createdMS int64, id string, err error) {
	createdMS, id, err = s.ParseAt(string(owner), c)
	if err != nil {
		return 0, "", err
	}
	if _, err := task.ParseID(id); err != nil {
		return 0, "", store.ErrBadCursor
	}
	return createdMS, id, nil
}
