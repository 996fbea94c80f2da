package task

import "time"

// Policy holds the server's retention and polling settings. The zero value
// is usable: it means the defaults below.
type Policy struct {
	// DefaultTTL is the retention granted when a client asks for none.
	// Zero means 1 hour.
	DefaultTTL time.Duration
	// MaxTTL caps any requested retention. Zero means 24 hours.
	MaxTTL time.Duration
	// PollInterval is the suggested delay between two polls of a task.
	// Zero means 500 ms.
	PollInterval time.Duration
}

// Default values used where a [Policy] field is zero.
const (
	DefaultTTL          = time.Hour
	DefaultMaxTTL       = 24 * time.Hour
	DefaultPollInterval = 500 * time.Millisecond
)

func (p Policy) defaultTTL() time.Duration {
	d := p.DefaultTTL
	if d <= 0 {
		d = DefaultTTL
	}
	return min(d, p.maxTTL())
}

func (p Policy) maxTTL() time.Duration {
	if p.MaxTTL <= 0 {
		return DefaultMaxTTL
	}
	return p.MaxTTL
}

// MaxRetention returns the effective maximum TTL.
func (p Policy) MaxRetention() time.Duration { return p.maxTTL() }

// Poll returns the effective poll interval.
func (p Policy) Poll() time.Duration {
	if p.PollInterval <= 0 {
		return DefaultPollInterval
	}
	return p.PollInterval
}

// TTL returns the retention to grant for a requested TTL. A nil or
// non-positive request gets the default; a request above the maximum is
// capped to it, never trusted.
func (p Policy) TTL(requested *time.Duration) time.Duration {
	if requested == nil || *requested <= 0 {
		return p.defaultTTL()
	}
	return min(*requested, p.maxTTL())
}
