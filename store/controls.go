package store

import (
	"context"
	"encoding/json"
	"errors"
	"time"
)

// Controls is the facet of [Store] that keeps the fleet's switches
// beside the tasks: the operator's settings that every instance sharing
// the store applies (the drain switch of each tool, canaries,
// rollbacks), each with who set it, when and why. Writes are rare;
// instances read [Controls.ControlsVersion] often and the whole set only
// when it moved.
type Controls interface {
	// SetControl writes c.Value under c.Name (a nil or JSON null Value
	// clears it), with c.By, c.Reason and c.At (zero: now), and returns
	// the control as stored, its Version the fleet's new version: every
	// write raises it, and writes are serialized across every process
	// sharing the store. When ifVersion is not negative and the control's
	// version is not ifVersion (0: the control was never set), nothing is
	// written and the error is ErrControlConflict.
	SetControl(ctx context.Context, c Control, ifVersion int64) (*Control, error)

	// Controls returns every control ever written, by name (a cleared one
	// with a nil Value, for its Version), and the fleet's version: the
	// highest Version of any write.
	Controls(ctx context.Context) (map[string]*Control, int64, error)

	// ControlsVersion returns the fleet's version alone: one index read.
	ControlsVersion(ctx context.Context) (int64, error)
}

// Control is one of the fleet's switches (see [Controls]).
type Control struct {
	// Name names the switch, e.g. "drain" or "canary/deploy".
	Name string
	// Value is the switch's setting, JSON; nil when cleared.
	Value json.RawMessage
	// By names who set it (an operator, "config", ...), Reason why.
	By, Reason string
	// At is when it was set.
	At time.Time
	// Version is the fleet's version this write raised it to.
	Version int64
}

// ErrControlConflict is returned by [Controls.SetControl] when the
// control changed since the version the writer read.
var ErrControlConflict = errors.New("the control changed meanwhile: read it again")
