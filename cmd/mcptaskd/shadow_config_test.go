package main

import (
	"strings"
	"testing"
)

// TestShadowConfig: an httpJobs entry with observe: true needs no start
// and makes an observe tool; without observe the same entry lacks its
// start.
func TestShadowConfig(t *testing.T) {
	t.Parallel()
	entry := "demo: false\nhttpJobs:\n  shadow_build:\n" +
		"    observe: true\n" +
		"    status: {url: \"http://127.0.0.1:1/jobs/{jobId}\", state: /state, working: [running], completed: [succeeded]}\n"
	getenv := func(string) string { return "" }
	fc, err := parseFileConfig([]byte(entry), getenv)
	if err != nil {
		t.Fatalf("observe: true without a start: %v", err)
	}
	if !fc.HTTPJobs["shadow_build"].Observe {
		t.Errorf("the entry: %+v; want observe", fc.HTTPJobs["shadow_build"])
	}
	if tools := fc.httpJobTools(); len(tools) != 1 || !tools[0].Observe || tools[0].Name != "shadow_build" {
		t.Errorf("the tools: %+v; want shadow_build observing", tools)
	}
	_, err = parseFileConfig([]byte(strings.Replace(entry, "observe: true", "observe: false", 1)), getenv)
	if err == nil || !strings.Contains(err.Error(), "httpJobs.shadow_build.start.url: required") {
		t.Errorf("observe: false without a start: %v; want start.url required", err)
	}
}
