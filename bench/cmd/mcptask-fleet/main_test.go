package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"strings"
	"testing"
	"time"
)

const dsnEnv = "MCPTASK_TEST_POSTGRES_DSN"

// TestSmoke runs every mode of the tool for a few operations.
func TestSmoke(t *testing.T) {
	if os.Getenv(dsnEnv) == "" {
		t.Skipf("mcptask-fleet needs PostgreSQL: set %s to a database where the tests may create and drop schemas, e.g. %s=postgres://postgres@127.0.0.1:5432/test?sslmode=disable",
			dsnEnv, dsnEnv)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var out, errOut bytes.Buffer
	err := run(ctx, []string{"-json", "-c", "2", "-d", "300ms", "-rounds", "1", "-cancels", "2", "-fallback", "1",
		"-cancel-lease", "300ms", "-kills", "1", "-lease", "600ms"}, &out, &errOut)
	if err != nil {
		t.Fatalf("%v\n%s", err, errOut.String())
	}
	var res results
	if err := json.Unmarshal(out.Bytes(), &res); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if len(res.Create) != 3 || res.Create[0].Backend != "sqlite" || res.Create[1].Stats.Ops == 0 || res.Create[2].ThroughputVsSQLite <= 0 {
		t.Errorf("create: %+v", res.Create)
	}
	if len(res.Cancel) != 5 {
		t.Errorf("cancel: want 5 kinds, got %+v", res.Cancel)
	}
	for _, c := range res.Cancel {
		if c.Stats.Ops == 0 || c.Stats.P50 <= 0 {
			t.Errorf("cancel %s: %+v", c.Name, c.Stats)
		}
	}
	if len(res.Takeover) != 1 || len(res.Takeover[0].Runs) != 1 || res.Takeover[0].Runs[0].All <= 0 {
		t.Errorf("takeover: %+v", res.Takeover)
	}
}

func TestFlags(t *testing.T) {
	env := func(string) string { return "postgres://x@127.0.0.1/db" }
	for _, args := range [][]string{
		{"bogus"},
		{"-c", "0"},
		{"-c", "1,x"},
		{"-lease", "0s"},
		{"-kills", "0"},
		{"-task-args", "{"},
	} {
		if _, err := parseFlags(args, env, new(bytes.Buffer)); err == nil {
			t.Errorf("%q: accepted", args)
		}
	}
	if _, err := parseFlags(nil, func(string) string { return "" }, new(bytes.Buffer)); !errors.Is(err, errNoDSN) {
		t.Errorf("without a DSN: %v", err)
	}
	c, err := parseFlags([]string{"-c", "1,8", "-lease", "1s,5s", "takeover", "cancel", "takeover"}, env, new(bytes.Buffer))
	if err != nil || len(c.conc) != 2 || len(c.leases) != 2 || c.leases[1] != 5*time.Second ||
		strings.Join(c.modes, ",") != "takeover,cancel" || c.dsn == "" {
		t.Errorf("parsed %+v, %v", c, err)
	}
	var help bytes.Buffer
	if _, err := parseFlags([]string{"-h"}, env, &help); !errors.Is(err, flag.ErrHelp) || !strings.Contains(help.String(), "takeover") {
		t.Errorf("-h: %v\n%s", err, help.String())
	}
}
