package task

import (
	"fmt"
	"strings"
	"testing"
)

// TestCheckCorrelation: the bounds of a correlation map, and Clone's copy.
func TestCheckCorrelation(t *testing.T) {
	full := map[string]string{}
	for i := range MaxCorrelationKeys {
		full[fmt.Sprintf("k%d", i)] = strings.Repeat("v", MaxCorrelationValue)
	}
	full[strings.Repeat("k", MaxCorrelationKey)] = "x"
	delete(full, "k0")
	for _, ok := range []map[string]string{nil, {}, full, {"claudecode/toolUseId": "toolu_01"}} {
		if err := CheckCorrelation(ok); err != nil {
			t.Errorf("CheckCorrelation(%d keys): %v", len(ok), err)
		}
	}
	over := map[string]string{"one/more": "x"}
	for k, v := range full {
		over[k] = v
	}
	for _, bad := range []map[string]string{over, {"": "v"}, {strings.Repeat("k", MaxCorrelationKey+1): "v"},
		{"k": strings.Repeat("v", MaxCorrelationValue+1)}, {"k": "a\x00"}, {"k\xff": "v"}} {
		if err := CheckCorrelation(bad); err == nil {
			t.Errorf("CheckCorrelation(%q) = nil", bad)
		}
	}
	tk := &Task{Correlation: map[string]string{"a": "b"}}
	c := tk.Clone()
	c.Correlation["a"] = "changed"
	if tk.Correlation["a"] != "b" {
		t.Error("Clone shares the correlation map")
	}
}
