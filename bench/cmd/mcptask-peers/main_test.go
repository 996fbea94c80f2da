package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSmoke runs every scenario for a moment against mcptask on both wires
// and against the peers, and checks that each ran without error. It skips
// when the peers cannot be built (no go command, or their modules cannot
// be downloaded).
func TestSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the peers")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command: ", err)
	}
	peers, err := findPeers()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, p := range []string{"mcpgo", "gosdk"} {
		if err := buildPeer(ctx, goBin, filepath.Join(peers, p), filepath.Join(t.TempDir(), p)); err != nil {
			t.Skip("cannot build the peers (offline?): ", err)
		}
	}
	var out, errOut bytes.Buffer
	err = run(ctx, []string{
		"-d", "150ms", "-rounds", "1", "-plain-c", "1,2", "-task-c", "1,2", "-sleep-c", "2",
		"-sleep", "20ms", "-poll", "5ms", "-get-c", "2", "-get-pool", "6", "-json",
	}, &out, &errOut)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, errOut.Bytes())
	}
	var rep struct {
		Results []struct {
			Scenario, Target string
			Median           figures
			VsMcpgo          float64 `json:"opsPerSecVsMcpgo"`
		}
	}
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatal(err)
	}
	// 6 scenarios on mcp-go and mcptask's two wires, plus 2 plain ones on
	// the go-sdk.
	if len(rep.Results) != 6*3+2 {
		t.Errorf("%d results, want 20", len(rep.Results))
	}
	for _, r := range rep.Results {
		m := r.Median
		if m.Ops == 0 || m.Errors != 0 || m.OpsPerSec <= 0 || m.OpP50 <= 0 {
			t.Errorf("%s on %s: %d ops, %d errors (%s)", r.Scenario, r.Target, m.Ops, m.Errors, m.FirstError)
		}
		if r.VsMcpgo <= 0 {
			t.Errorf("%s on %s: no ratio to mcp-go", r.Scenario, r.Target)
		}
		task := strings.Contains(r.Scenario, "task")
		if task && (m.CreateP50 <= 0 || m.GetP50 <= 0 || m.GetsPerTask < 1) {
			t.Errorf("%s on %s: create %v, get %v, gets/task %.2f", r.Scenario, r.Target, m.CreateP50, m.GetP50, m.GetsPerTask)
		}
		if task && (m.ResultP50 > 0) != (r.Target != targetMcptask2026) {
			t.Errorf("%s on %s: tasks/result p50 %v (only on 2025-11-25)", r.Scenario, r.Target, m.ResultP50)
		}
	}
}

// TestFlags checks that bad flags are refused before anything starts.
func TestFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-targets", "nope"},
		{"-plain-c", "0"},
		{"-get-c", "32", "-get-pool", "8"},
		{"-d", "0s"},
		{"extra"},
	} {
		var out, errOut bytes.Buffer
		if err := run(context.Background(), args, &out, &errOut); err == nil {
			t.Errorf("%q: accepted", args)
		}
	}
}

// TestMain serves mcptask instead of testing when started as the child of
// -mcptask-child (see TestChild).
func TestMain(m *testing.M) {
	if v := os.Getenv(childEnv); v != "" {
		os.Exit(serveChild(v))
	}
	os.Exit(m.Run())
}

// TestChild runs the plain call and the no-op task against mcptask run as
// a child process (-mcptask-child).
func TestChild(t *testing.T) {
	var out, errOut bytes.Buffer
	err := run(context.Background(), []string{
		"-mcptask-child", "-targets", "mcptask-2025,mcptask-2026", "-d", "100ms", "-rounds", "1",
		"-plain-c", "1", "-task-c", "1", "-sleep-c", "", "-get-c", "", "-poll", "5ms", "-json",
	}, &out, &errOut)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, errOut.Bytes())
	}
	var rep struct {
		Environment map[string]any
		Results     []struct {
			Scenario, Target string
			Median           figures
		}
	}
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(rep.Environment["mcptask"].(string), "child process") {
		t.Errorf("mcptask: %v", rep.Environment["mcptask"])
	}
	if len(rep.Results) != 4 {
		t.Errorf("%d results, want 4", len(rep.Results))
	}
	for _, r := range rep.Results {
		if r.Median.Ops == 0 || r.Median.Errors != 0 {
			t.Errorf("%s on %s: %d ops, %d errors (%s)", r.Scenario, r.Target, r.Median.Ops, r.Median.Errors, r.Median.FirstError)
		}
	}
}
