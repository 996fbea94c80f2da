package rowcodec

import (
	"encoding/json"
	"errors"
	"time"

	"github.com/mcptask/mcptask/store"
)

// ControlArgs checks the fleet's switch c before a write and returns its
// stored value (nil: cleared, NULL) and time (c.At, else now) in Unix
// milliseconds.
func ControlArgs(c store.Control, now time.Time) (value *string, atMS int64, err error) {
	if c.Name == "" {
		return nil, 0, errors.New("SetControl without a name")
	}
	if len(c.Value) > 0 && string(c.Value) != "null" {
		if !json.Valid(c.Value) {
			return nil, 0, errors.New("SetControl: the value is not JSON")
		}
		v := string(c.Value)
		value = &v
	}
	at := c.At
	if at.IsZero() {
		at = now
	}
	return value, at.UnixMilli(), nil
}

// Control is the switch of a controls row (its value NULL: cleared, a
// nil Value).
func Control(name string, value *string, by, reason string, atMS, version int64) *store.Control {
	c := &store.Control{Name: name, By: by, Reason: reason, At: MSTime(atMS), Version: version}
	if value != nil {
		c.Value = json.RawMessage(*value)
	}
	return c
}

// ControlWritten is the switch c as SetControl stored it (value and
// atMS as ControlArgs gave them, version the new version).
func ControlWritten(c store.Control, value *string, atMS, version int64) *store.Control {
	return Control(c.Name, value, c.By, c.Reason, atMS, version)
}

// Rows is what ControlRows reads: *sql.Rows or pgx.Rows.
type Rows interface {
	Next() bool
	Scan(dest ...any) error
	Err() error
}

// ControlRows reads the rows of
// SELECT name, value, set_by, reason, at_ms, version FROM controls:
// every switch by name, and the highest version.
func ControlRows(rows Rows) (map[string]*store.Control, int64, error) {
	out := map[string]*store.Control{}
	var top int64
	for rows.Next() {
		var name, by, reason string
		var value *string
		var atMS, version int64
		if err := rows.Scan(&name, &value, &by, &reason, &atMS, &version); err != nil {
			return nil, 0, err
		}
		top = max(top, version)
		out[name] = Control(name, value, by, reason, atMS, version)
	}
	return out, top, rows.Err()
}
