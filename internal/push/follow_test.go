package push

import (
	"testing"
	"time"
)

// TestWithDefaultsIdempotent: options defaulted twice (by the wire, then
// by Follow) keep what the caller asked for; a negative MinInterval (every
// change) once turned into the 50 ms default on the second pass.
func TestWithDefaultsIdempotent(t *testing.T) {
	for _, o := range []Options{{}, {MinInterval: -1}, {MinInterval: time.Second, KeepAlive: time.Minute, MaxStreams: -1}} {
		once := o.WithDefaults()
		if twice := once.WithDefaults(); twice != once {
			t.Errorf("%+v: defaulted once %+v, twice %+v", o, once, twice)
		}
	}
	if o := (Options{MinInterval: -1}).WithDefaults(); o.MinInterval >= 0 {
		t.Errorf("MinInterval -1 became %v", o.MinInterval)
	}
}
