package task

import (
	"fmt"
	"maps"
	"strings"
	"unicode/utf8"
)

// Bounds of a correlation map (Task.Correlation, Operation.Correlation):
// a host names a few calls, it does not ship data.
const (
	// MaxCorrelationKeys is the most keys a correlation map holds.
	MaxCorrelationKeys = 8
	// MaxCorrelationKey is the longest key, in bytes.
	MaxCorrelationKey = 128
	// MaxCorrelationValue is the longest value, in bytes.
	MaxCorrelationValue = 256
)

// CheckCorrelation reports whether c is a valid correlation map: at most
// [MaxCorrelationKeys] keys, each a non-empty string of at most
// [MaxCorrelationKey] bytes, each value at most [MaxCorrelationValue]
// bytes, all valid UTF-8 without NUL. A nil or empty map is valid.
func CheckCorrelation(c map[string]string) error {
	if len(c) > MaxCorrelationKeys {
		return fmt.Errorf("correlation has %d keys, more than %d", len(c), MaxCorrelationKeys)
	}
	for k, v := range c {
		switch {
		case k == "":
			return fmt.Errorf("correlation has an empty key")
		case len(k) > MaxCorrelationKey:
			return fmt.Errorf("correlation key %.40q… is longer than %d bytes", k, MaxCorrelationKey)
		case !cleanText(k):
			return fmt.Errorf("correlation key %q is not valid UTF-8 without NUL", k)
		case len(v) > MaxCorrelationValue:
			return fmt.Errorf("correlation value of %q is longer than %d bytes", k, MaxCorrelationValue)
		case !cleanText(v):
			return fmt.Errorf("correlation value of %q is not valid UTF-8 without NUL", k)
		}
	}
	return nil
}

func cleanText(s string) bool { return utf8.ValidString(s) && !strings.ContainsRune(s, 0) }

// CloneCorrelation returns a copy of c, nil when c is empty.
func CloneCorrelation(c map[string]string) map[string]string {
	if len(c) == 0 {
		return nil
	}
	return maps.Clone(c)
}
