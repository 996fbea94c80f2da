package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/mcptask/mcptask/client"
)

// cmdManifest is 'mcptask manifest'.
var cmdManifest = &command{
	name:     "manifest",
	synopsis: "[--require TOOL[:task] ...] [--require-op OP ...] [--allow-sync] [--allow-job-api]",
	summary:  "print what the server offers for tasks, and check a workflow's needs",
	help: `
Prints the server's capability manifest, read on this session: the
negotiated protocol revision and task wire (2026-07-28 extension,
2025-11-25 experimental tasks, or none), the server's name and version, the
session evidence (its session ID, stateless, or the connection itself), the
task operations it offers (list, get, result, cancel, update, delete,
input), whether it honours idempotency keys (io.mcptask/idempotency), each
tool's task support (forbidden, optional, required, or unstated) and its
job API if it has one. A server without tasks is said to have none, with
the reason and the fallback that applies: the job API when the server has
one, else the synchronous path.

With --require and --require-op, checks a workflow's needs before its first
call: --require TOOL:task needs TOOL to run as a task, --require TOOL only
needs TOOL to exist; --require-op needs a task operation (list, cancel,
input, delete, idempotency). Each unmet need is printed with the fallback
that applies. A tool needed as a task that cannot run as one is refused
(exit 7) unless its fallback is allowed explicitly: --allow-sync for the
synchronous path (a plain call lasting as long as the tool runs),
--allow-job-api for the job API. A refusal is never allowed.`,
	flags: func(a *app, fs *flag.FlagSet) {
		fs.Func("require", "a `TOOL` the workflow calls, or TOOL:task when it calls it as a task (repeatable)", func(v string) error {
			name, task := strings.CutSuffix(v, ":task")
			if name == "" {
				return fmt.Errorf("want TOOL or TOOL:task, not %q", v)
			}
			if task {
				a.cmd.manifest.needs.Tasks = append(a.cmd.manifest.needs.Tasks, name)
			} else {
				a.cmd.manifest.needs.Tools = append(a.cmd.manifest.needs.Tools, name)
			}
			a.cmd.manifest.check = true
			return nil
		})
		fs.Func("require-op", "a task operation the workflow uses: list, cancel, input, delete or idempotency (repeatable, or comma-separated `OP`s)", func(v string) error {
			n := &a.cmd.manifest.needs
			for _, op := range strings.Split(v, ",") {
				switch strings.TrimSpace(op) {
				case "list":
					n.List = true
				case "cancel":
					n.Cancel = true
				case "input":
					n.Input = true
				case "delete":
					n.Delete = true
				case "idempotency":
					n.Idempotency = true
				default:
					return fmt.Errorf("unknown operation %q (want list, cancel, input, delete or idempotency)", op)
				}
			}
			a.cmd.manifest.check = true
			return nil
		})
		fs.BoolVar(&a.cmd.manifest.needs.AllowSync, "allow-sync", false, "allow a tool needed as a task to run as a plain, synchronous call where it cannot run as a task")
		fs.BoolVar(&a.cmd.manifest.needs.AllowJobAPI, "allow-job-api", false, "allow the server's job API to stand in where tasks are missing")
	},
	run: runManifest,
}

// manifestFlags are the flags of 'mcptask manifest'.
type manifestFlags struct {
	needs client.Needs
	check bool // --require or --require-op was given
}

// jsonManifest is what 'mcptask manifest --json' prints.
type jsonManifest struct {
	*client.Manifest
	// Require is the check of --require and --require-op, when given.
	Require *jsonRequire `json:"require,omitempty"`
}

// jsonRequire is the outcome of a check of needs.
type jsonRequire struct {
	Needs client.Needs `json:"needs"`
	// Met is true when the workflow may start (every need met, or met by
	// an allowed fallback).
	Met bool `json:"met"`
	// Unmet lists every unmet need, with its fallback and whether it is
	// allowed.
	Unmet []client.Unmet `json:"unmet"`
}

func runManifest(a *app, ctx context.Context, pos []string) int {
	if len(pos) > 0 {
		return a.usage(usagef("manifest takes no arguments (got %q)", pos[0]))
	}
	c, err := a.connect(ctx, a.g.target(), a.g.wire)
	if err != nil {
		return a.report(ctx, &outcome{err: err})
	}
	defer c.Close()
	rctx, cancel := requestContext(ctx)
	defer cancel()
	m, err := c.Manifest(rctx)
	if err != nil {
		return a.report(ctx, &outcome{err: fmt.Errorf("reading the manifest: %w", err)})
	}
	var req *jsonRequire
	if a.cmd.manifest.check {
		req = &jsonRequire{Needs: a.cmd.manifest.needs, Unmet: []client.Unmet{}}
		plan, err := client.Require(m, req.Needs)
		var ue *client.UnmetError
		switch {
		case err == nil:
			req.Met = true
			req.Unmet = plan.Fallbacks
		case errors.As(err, &ue):
			// Every unmet need: the refused ones and those allowed.
			all, _ := client.Require(m, allowAll(req.Needs))
			req.Unmet = ue.Unmet
			if all != nil {
				req.Unmet = append(req.Unmet, allowedOnly(all.Fallbacks, req.Needs)...)
			}
		default:
			return a.report(ctx, &outcome{err: err})
		}
	}
	if a.g.json {
		a.printJSON(jsonManifest{Manifest: m, Require: req})
	} else {
		printManifest(a, m, req)
	}
	if req != nil && !req.Met {
		a.errorf("the server does not meet the workflow's needs; do not start it (exit %d)", exitUnmet)
		return exitUnmet
	}
	return exitOK
}

// allowAll returns n with every fallback allowed, to learn which unmet
// needs an allowed fallback covers when others are refused.
func allowAll(n client.Needs) client.Needs {
	n.AllowSync, n.AllowJobAPI = true, true
	return n
}

// allowedOnly keeps the fallbacks the needs really allow.
func allowedOnly(us []client.Unmet, n client.Needs) []client.Unmet {
	var out []client.Unmet
	for _, u := range us {
		if (u.Fallback == client.FallbackSync && n.AllowSync) || (u.Fallback == client.FallbackJobAPI && n.AllowJobAPI) {
			out = append(out, u)
		}
	}
	return out
}

// printManifest prints a manifest for people.
func printManifest(a *app, m *client.Manifest, req *jsonRequire) {
	w := a.stdout
	server := m.Server.Name
	if m.Server.Version != "" {
		server += " " + m.Server.Version
	}
	fmt.Fprintf(w, "server:       %s (%s)\n", orUnknown(server), m.Target)
	fmt.Fprintf(w, "protocol:     %s\n", m.ProtocolVersion)
	session := m.Session.Kind
	switch m.Session.Kind {
	case client.SessionID:
		session = "session ID " + m.Session.ID
	case client.SessionStateless:
		session = "stateless (no session ID)"
	case client.SessionConnection:
		session = "the connection (no session ID)"
	}
	fmt.Fprintf(w, "session:      %s\n", session)
	if m.Tasks() {
		fmt.Fprintf(w, "tasks:        %s\n", m.TaskWire)
		fmt.Fprintf(w, "operations:   %s\n", m.Operations)
	} else {
		fmt.Fprintf(w, "tasks:        none (%s)\n", m.NoTasks)
	}
	idem := "no"
	if m.Idempotency {
		idem = "yes (io.mcptask/idempotency)"
	}
	fmt.Fprintf(w, "idempotency:  %s\n", idem)
	if m.JobAPI != nil {
		fmt.Fprintf(w, "job API:      %s\n", strings.Join(m.JobAPI.Tools, ", "))
	} else {
		fmt.Fprintln(w, "job API:      none")
	}
	if !m.Tasks() {
		fmt.Fprintf(w, "fallback:     %s for a call that needs a task\n", m.Fallback.Describe())
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TOOL\tTASK SUPPORT\tRUNS AS A TASK")
	for _, t := range m.Tools {
		runs := "no"
		if t.Task {
			runs = "yes"
		}
		switch {
		case t.Mode == "approval":
			runs += " (after an approval)"
		case t.Mode != "" && t.Mode != "task":
			runs += " (" + t.ModeReason + ": " + t.Mode + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", t.Name, t.TaskSupport, runs)
	}
	tw.Flush()
	if req == nil {
		return
	}
	fmt.Fprintln(w)
	if len(req.Unmet) == 0 {
		fmt.Fprintln(w, "requirements: met")
		return
	}
	if req.Met {
		fmt.Fprintln(w, "requirements: met with allowed fallbacks")
	} else {
		fmt.Fprintln(w, "requirements: NOT met")
	}
	for _, u := range req.Unmet {
		fmt.Fprintf(w, "  %s\n", u)
	}
}
