package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func runArgs(t *testing.T, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out, errOut bytes.Buffer
	err := run(ctx, args, &out, &errOut)
	return out.String() + errOut.String(), err
}

// TestCompareSmoke runs the load tool's core for a few operations.
func TestCompareSmoke(t *testing.T) {
	db := filepath.Join(t.TempDir(), "tasks.db")
	out, err := runArgs(t, "-db", db, "-c", "2", "-n", "6", "-rounds", "2", "-warmup", "2", "-get-pool", "2", "-v")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{"plain", "tasks/get", "create", "÷ plain", "round 2"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// TestCompareLimits runs the comparison with limits and audit trail on:
// nothing may be refused.
func TestCompareLimits(t *testing.T) {
	out, err := runArgs(t, "-limits", "-c", "2", "-n", "6", "-rounds", "2", "-warmup", "2", "-get-pool", "2")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{"limits and audit trail on", "tasks/get", "create", "÷ plain"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	out, err = runArgs(t, "-limits", "-c", "1", "-n", "3", "-rounds", "1", "-warmup", "1", "-get-pool", "1", "-json")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var res struct {
		Environment struct{ Limits bool }
		Create      struct{ Ops, Errors int64 }
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !res.Environment.Limits || res.Create.Ops != 3 || res.Create.Errors != 0 {
		t.Errorf("figures: %+v", res)
	}
}

func TestCompareJSON(t *testing.T) {
	out, err := runArgs(t, "-c", "1", "-n", "3", "-rounds", "1", "-warmup", "1", "-get-pool", "1", "-json")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var res struct {
		Plain, TasksGet, Create struct {
			Ops   int64
			P50Ns int64
		}
		Ratios struct{ GetP50, CreateP50 float64 }
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if res.Plain.Ops != 3 || res.TasksGet.Ops != 3 || res.Create.Ops != 3 || res.Plain.P50Ns <= 0 || res.Ratios.CreateP50 <= 0 {
		t.Errorf("figures: %+v", res)
	}
}

func TestMemorySmoke(t *testing.T) {
	out, err := runArgs(t, "-memory", "-tasks", "12", "-points", "4,8,1000", "-c", "2")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !strings.Contains(out, "heap in use @12 ÷ @4") {
		t.Errorf("output lacks the ratio:\n%s", out)
	}
	out, err = runArgs(t, "-memory", "-tasks", "6", "-points", "3", "-c", "2", "-json")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var res struct {
		Points []struct {
			Tasks          int64
			HeapInuseBytes uint64
		}
		HeapInuseRatio float64
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if len(res.Points) != 2 || res.Points[0].Tasks != 3 || res.Points[1].Tasks != 6 || res.Points[1].HeapInuseBytes == 0 || res.HeapInuseRatio <= 0 {
		t.Errorf("figures: %+v", res)
	}
}

func TestFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-url", "http://example.com/mcp"},
		{"-url", "http://10.1.2.3:8080/mcp"},
		{"-url", "http://127.0.0.1:8080/mcp", "-memory"},
		{"-url", "http://127.0.0.1:8080/mcp", "-limits"},
		{"-url", "http://127.0.0.1:8080/mcp", "-flood", "4"},
		{"-flood", "4", "-memory"},
		{"-flood", "4", "-limits"},
		{"-flood", "4", "-request-rate", "0"},
		{"-flood", "4", "-get-pool", "1000"},
		{"-flood", "-1"},
		{"-c", "0"},
		{"-points", "1,x"},
		{"extra"},
	} {
		if _, err := parseFlags(args, new(bytes.Buffer)); err == nil {
			t.Errorf("%q: accepted", args)
		}
	}
	c, err := parseFlags([]string{"-url", "http://localhost:8080/mcp"}, new(bytes.Buffer))
	if err != nil || c.plainTool != daemonPlainTool || c.taskTool != daemonTaskTool || c.taskArgs != daemonTaskArgs {
		t.Errorf("-url defaults: %+v, %v", c, err)
	}
	c, err = parseFlags([]string{"-tasks", "20000", "-points", "1000,50000,10000"}, new(bytes.Buffer))
	if err != nil || len(c.points) != 3 || c.points[0] != 1000 || c.points[1] != 10000 || c.points[2] != 20000 {
		t.Errorf("points: %v, %v", c.points, err)
	}
	c, err = parseFlags([]string{"-flood", "4"}, new(bytes.Buffer))
	if err != nil || c.getPool != 16 || c.victimRate != 40 || c.requestRate != 50 {
		t.Errorf("-flood defaults: %+v, %v", c, err)
	}
	var help bytes.Buffer
	if _, err := parseFlags([]string{"-h"}, &help); !errors.Is(err, flag.ErrHelp) || !strings.Contains(help.String(), "-memory") {
		t.Errorf("-h: %v\n%s", err, help.String())
	}
}

// TestFloodSmoke runs the flood mode for a moment, with limits low enough
// that the flooder is refused whatever the machine's speed: it checks the
// structure only (the victim refused nothing, the flooder was both served
// and refused), never timing.
func TestFloodSmoke(t *testing.T) {
	out, err := runArgs(t, "-flood", "3", "-c", "2", "-d", "1s", "-rounds", "1", "-warmup", "2",
		"-request-rate", "10", "-request-burst", "5", "-victim-rate", "4", "-get-pool", "2", "-json")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var res struct {
		Environment struct{ Limits bool }
		Flooders    int
		Quiet       struct{ Ops, Errors int64 }
		Flooded     struct{ Ops, Errors int64 }
		Ratios      struct{ P50 float64 }

		VictimRefused, FlooderServed, FlooderRefused int64
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !res.Environment.Limits || res.Flooders != 3 || res.Quiet.Ops == 0 || res.Flooded.Ops == 0 || res.Ratios.P50 <= 0 {
		t.Errorf("figures: %+v\n%s", res, out)
	}
	if res.VictimRefused != 0 || res.Quiet.Errors != 0 || res.Flooded.Errors != 0 {
		t.Errorf("the victim was refused: %+v", res)
	}
	if res.FlooderServed == 0 || res.FlooderRefused == 0 {
		t.Errorf("the flooder was not both served and refused: %+v", res)
	}
	out, err = runArgs(t, "-flood", "2", "-c", "1", "-d", "400ms", "-rounds", "1", "-warmup", "1", "-get-pool", "1", "-v")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{"without flood", "with flood", "victim with ÷ without flood", "refused", "round 1 flooded"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
