package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// smokeArgs are tiny sizes and durations: every part in a few seconds.
var smokeArgs = []string{"-sizes", "20,60", "-c", "2", "-create-c", "1,2", "-instances", "1,2",
	"-d", "200ms", "-rounds", "1", "-recent", "5", "-pool", "50", "-fill-chunk", "25", "-fill-workers", "2"}

func runCurves(t *testing.T, args ...string) (string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out, errOut bytes.Buffer
	if err := run(ctx, args, &out, &errOut); err != nil {
		t.Fatalf("%v\n%s%s", err, out.String(), errOut.String())
	}
	return out.String(), errOut.String()
}

// TestSmokeSQLite runs the retained and create parts on SQLite for a few
// operations.
func TestSmokeSQLite(t *testing.T) {
	out, _ := runCurves(t, append([]string{"-backends", "sqlite", "-dir", t.TempDir(), "-json"}, smokeArgs...)...)
	var rep Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if len(rep.Retained) != 2 || rep.Retained[1].Retained != 60 || rep.Retained[1].FillTime <= 0 {
		t.Fatalf("retained: %+v", rep.Retained)
	}
	for _, p := range rep.Retained {
		if p.GetRandom.Ops == 0 || p.GetRecent.Ops == 0 || p.Create.Ops == 0 || p.FillTime <= 0 {
			t.Errorf("retained %d: %+v", p.Retained, p)
		}
	}
	if len(rep.Create) != 2 || rep.Create[1].Workers != 2 || rep.Create[1].Create.Ops == 0 {
		t.Errorf("create: %+v", rep.Create)
	}
	if len(rep.Instances) != 0 {
		t.Errorf("instances without PostgreSQL: %+v", rep.Instances)
	}
	// The tables of that JSON output.
	saved := filepath.Join(t.TempDir(), "curves.json")
	if err := os.WriteFile(saved, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
	printed, _ := runCurves(t, "-print", saved)
	for _, want := range []string{"retained tasks", "÷ 20", "creation by number of workers"} {
		if !strings.Contains(printed, want) {
			t.Errorf("-print output lacks %q:\n%s", want, printed)
		}
	}
	// The text output of a run, smaller.
	out, _ = runCurves(t, "-backends", "sqlite", "-sizes", "10", "-c", "1", "-create-c", "1", "-d", "100ms", "-rounds", "1", "retained", "create")
	for _, want := range []string{"retained tasks", "creation by number of workers", "sqlite"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// TestSmokePostgres runs every part on PostgreSQL for a few operations;
// it skips without a server.
func TestSmokePostgres(t *testing.T) {
	if os.Getenv("MCPTASK_TEST_POSTGRES_DSN") == "" {
		t.Skip("needs PostgreSQL: set MCPTASK_TEST_POSTGRES_DSN, e.g. postgres://postgres@127.0.0.1:5432/test?sslmode=disable")
	}
	out, _ := runCurves(t, append([]string{"-backends", "postgres", "-json"}, smokeArgs...)...)
	var rep Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if len(rep.Retained) != 2 || rep.Retained[1].GetRandom.Ops == 0 || rep.Retained[1].Create.Ops == 0 {
		t.Errorf("retained: %+v", rep.Retained)
	}
	if len(rep.Create) != 2 || rep.Create[0].Create.Ops == 0 {
		t.Errorf("create: %+v", rep.Create)
	}
	if len(rep.Instances) != 2 || rep.Instances[1].Instances != 2 || rep.Instances[1].Get.Ops == 0 || rep.Instances[1].Create.Ops == 0 {
		t.Errorf("instances: %+v", rep.Instances)
	}
}

// TestFlags checks the command line's checks.
func TestFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-sizes", "100,10"},
		{"-backends", "mysql"},
		{"-create-c", "0"},
		{"nonsense"},
	} {
		var out bytes.Buffer
		if err := run(context.Background(), args, &out, &out); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
}
