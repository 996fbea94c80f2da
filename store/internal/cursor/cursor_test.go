package cursor

import (
	"errors"
	"testing"
	"time"

	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/task"
)

func TestRoundTripAndTampering(t *testing.T) {
	s := Signer{Key: []byte("0123456789abcdef0123456789abcdef"), Domain: "test"}
	tk := task.New(task.Policy{}, "alice", "tool", nil, time.UnixMilli(1_700_000_000_123))
	c := s.Make("alice", tk)
	ms, id, err := s.Parse("alice", c)
	if err != nil || ms != 1_700_000_000_123 || id != string(tk.ID) {
		t.Fatalf("Parse = %d %q %v", ms, id, err)
	}
	flip := []byte(c)
	flip[len(flip)/2] ^= 1
	for name, bad := range map[string]func() (int64, string, error){
		"other owner":  func() (int64, string, error) { return s.Parse("bob", c) },
		"other key":    func() (int64, string, error) { return Signer{Key: []byte("x"), Domain: "test"}.Parse("alice", c) },
		"other domain": func() (int64, string, error) { return Signer{Key: s.Key, Domain: "other"}.Parse("alice", c) },
		"tampered":     func() (int64, string, error) { return s.Parse("alice", string(flip)) },
		"truncated":    func() (int64, string, error) { return s.Parse("alice", c[:10]) },
		"garbage":      func() (int64, string, error) { return s.Parse("alice", "not a cursor!") },
		"empty":        func() (int64, string, error) { return s.Parse("alice", "") },
	} {
		if _, _, err := bad(); !errors.Is(err, store.ErrBadCursor) {
			t.Errorf("%s: err = %v, want ErrBadCursor", name, err)
		}
	}
}

func FuzzParse(f *testing.F) {
	s := Signer{Key: []byte("k"), Domain: "fuzz"}
	f.Add(s.Make("o", task.New(task.Policy{}, "o", "t", nil, time.Now())))
	f.Add("AAAA")
	f.Fuzz(func(t *testing.T, c string) {
		if _, _, err := s.Parse("o", c); err != nil && !errors.Is(err, store.ErrBadCursor) {
			t.Fatalf("unexpected error %v", err)
		}
	})
}
