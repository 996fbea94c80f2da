package task

import (
	"crypto/rand"
	"encoding/base32"
	"errors"
	"fmt"
)

// ID identifies a task. IDs minted by [NewID] carry 160 bits from crypto/rand
// and are unguessable; IDs are opaque to clients.
type ID string

// MaxIDLength is the longest task ID accepted on any wire.
const MaxIDLength = 128

var idEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// NewID returns a fresh random task ID of 32 lowercase characters
// (160 bits of entropy from crypto/rand).
func NewID() ID {
	var b [20]byte
	// crypto/rand.Read never returns an error on supported platforms and
	// panics itself if the system source fails.
	_, _ = rand.Read(b[:])
	return ID(idEncoding.EncodeToString(b[:]))
}

// ErrMalformedID is returned by [ParseID] for a string that cannot be a task ID.
var ErrMalformedID = errors.New("malformed taskId")

// ParseID validates s as a task ID received from a client: 1 to
// [MaxIDLength] characters from [A-Za-z0-9._:-]. It accepts IDs minted by
// other implementations too; whether the task exists is the store's answer.
func ParseID(s string) (ID, error) {
	if len(s) == 0 {
		return "", fmt.Errorf("%w: taskId is empty", ErrMalformedID)
	}
	if len(s) > MaxIDLength {
		return "", fmt.Errorf("%w: taskId is longer than %d characters", ErrMalformedID, MaxIDLength)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '_', c == '.', c == ':':
		default:
			return "", fmt.Errorf("%w: taskId contains the character %q", ErrMalformedID, c)
		}
	}
	return ID(s), nil
}
