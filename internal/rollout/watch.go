package rollout

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/mcptask/mcptask/store"
)

// The names of the fleet's switches in the store (store.Controls).
const (
	// ControlDrain is the fleet's drain switch (a Drain).
	ControlDrain = "drain"
	// ControlCanary prefixes a tool's canary (a Canary).
	ControlCanary = "canary/"
	// ControlRollback prefixes a tool's rollback (a Rollback).
	ControlRollback = "rollback/"
)

// DefaultReadTimeout bounds one read of the switches by a Watcher.
const DefaultReadTimeout = 5 * time.Second

// Watcher is the service that reads the fleet's switches from the store:
// their version every interval (one index read), all of them when it
// moved, each time handing them to apply. A failed read keeps the last
// switches applied and is logged once until a read succeeds.
type Watcher struct {
	st       store.Controls
	interval time.Duration
	log      *slog.Logger
	apply    func()

	mu       sync.Mutex
	read     bool
	controls map[string]*store.Control
	version  int64
	at       time.Time
}

// NewWatcher returns the watcher of st's switches; apply is called after
// every read that found them changed (and after the first).
func NewWatcher(st store.Controls, interval time.Duration, log *slog.Logger, apply func()) *Watcher {
	return &Watcher{st: st, interval: interval, log: log, apply: apply}
}

// Read reads the switches now if their version moved (or was never
// read), and applies them.
func (w *Watcher) Read(ctx context.Context, now time.Time) error {
	v, err := w.st.ControlsVersion(ctx)
	if err != nil {
		return err
	}
	w.mu.Lock()
	fresh := w.read && v == w.version
	if fresh {
		w.at = now
	}
	w.mu.Unlock()
	if fresh {
		return nil
	}
	controls, v, err := w.st.Controls(ctx)
	if err != nil {
		return err
	}
	w.mu.Lock()
	changed := !w.read || v != w.version
	if !w.read || v >= w.version {
		w.controls, w.version = controls, v
	}
	w.read, w.at = true, now
	w.mu.Unlock()
	if changed {
		w.log.Info("the fleet's switches read", "version", v)
		w.apply()
	}
	return nil
}

// Last returns the switches last read, their version and when.
func (w *Watcher) Last() (map[string]*store.Control, int64, time.Time) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.controls, w.version, w.at
}

// Run reads the switches every interval until ctx is done.
func (w *Watcher) Run(ctx context.Context, now func() time.Time) {
	tick := time.NewTicker(w.interval)
	defer tick.Stop()
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		rctx, cancel := context.WithTimeout(ctx, DefaultReadTimeout)
		err := w.Read(rctx, now())
		cancel()
		if err != nil && ctx.Err() == nil && !failing {
			w.log.Warn("reading the fleet's switches (the last read stay applied)", "err", err)
		}
		failing = err != nil
	}
}

// StateOf is the State of the switches controls, with the instance's own
// drain local. Switches that do not decode are left out.
func StateOf(controls map[string]*store.Control, local Drain) *State {
	st := &State{Local: local, Canaries: map[string]Canary{}, Rollbacks: map[string]Rollback{}}
	for name, c := range controls {
		if c.Value == nil {
			continue // cleared
		}
		switch {
		case name == ControlDrain:
			_ = json.Unmarshal(c.Value, &st.Fleet)
		case strings.HasPrefix(name, ControlCanary):
			var cn Canary
			if json.Unmarshal(c.Value, &cn) == nil {
				st.Canaries[strings.TrimPrefix(name, ControlCanary)] = cn
			}
		case strings.HasPrefix(name, ControlRollback):
			var rb Rollback
			if json.Unmarshal(c.Value, &rb) == nil {
				st.Rollbacks[strings.TrimPrefix(name, ControlRollback)] = rb
			}
		}
	}
	return st
}
