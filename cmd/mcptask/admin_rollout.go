package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// adminFleet is the answer of GET /admin/fleet (and of a canary's PUT):
// the fleet's switches as the answering instance last read them
// (mcptask.Fleet, mirrored here: the CLI reads the admin endpoints' JSON
// and does not link the server library).
type adminFleet struct {
	Drain      adminSwitch              `json:"drain"`
	LocalDrain adminSwitch              `json:"localDrain"`
	Canaries   map[string]adminCanary   `json:"canaries"`
	Rollbacks  map[string]adminRollback `json:"rollbacks"`
	Version    int64                    `json:"version"`
	ReadAt     time.Time                `json:"readAt"`
}

// adminSwitch is a drain switch of the fleet's answer.
type adminSwitch struct {
	All      bool      `json:"all"`
	Tools    []string  `json:"tools"`
	Fallback string    `json:"fallback"`
	Reason   string    `json:"reason"`
	By       string    `json:"by"`
	At       time.Time `json:"at"`
}

// adminCanary is a tool's canary: the requesters served as tasks.
type adminCanary struct {
	Tenants    []string  `json:"tenants"`
	Principals []string  `json:"principals"`
	Percent    int       `json:"percent"`
	Reason     string    `json:"reason"`
	By         string    `json:"by"`
	At         time.Time `json:"at"`
}

// adminRollback is a rollback's report (mcptask.RollbackReport).
type adminRollback struct {
	Tool      string    `json:"tool"`
	Fallback  string    `json:"fallback"`
	Reason    string    `json:"reason"`
	By        string    `json:"by"`
	At        time.Time `json:"at"`
	Running   []string  `json:"running"`
	Held      []string  `json:"held"`
	Confirmed []string  `json:"confirmed"`
	Rejected  []string  `json:"rejected"`
	Unknown   []string  `json:"unknown"`
	InFlight  []string  `json:"inFlight"`
	Undone    bool      `json:"undone"`
}

// cmdAdminFleet is 'mcptask admin fleet'.
var cmdAdminFleet = &command{
	name:     "admin fleet",
	synopsis: "",
	summary:  "show the fleet's switches: drains, canaries, rollbacks (/admin/fleet)",
	help: `
'mcptask admin fleet' shows the fleet's switches as the answering mcptaskd
applies them: the fleet's drain and its own (its configuration file's), the
canaries (per tool: the percentage of requesters, the tenants and principals
served as tasks) and the rollbacks (per tool: the fallback its new calls get,
and what the rollback found: tasks left running, operations confirmed,
rejected or unknown), each with who set it, when and why.`,
	exitsText: adminExits,
	flags: func(a *app, fs *flag.FlagSet) {
		a.defineAdminURL(fs, adminFleetPath)
	},
	run: runAdminFleet,
}

// runAdminFleet runs 'mcptask admin fleet'.
func runAdminFleet(a *app, ctx context.Context, pos []string) int {
	if len(pos) != 0 {
		return a.usage(usagef("admin fleet takes no arguments: got %q", pos))
	}
	raw, err := a.adminCall(ctx, http.MethodGet, adminFleetPath, nil, nil)
	if err != nil {
		return a.adminFailed(ctx, err)
	}
	var f adminFleet
	if err := decodeAdmin(raw, &f, adminFleetPath, "the fleet's switches"); err != nil {
		return a.adminFailed(ctx, err)
	}
	if a.g.json {
		a.printRaw(raw)
		return exitOK
	}
	printFleet(a.stdout, &f)
	return exitOK
}

// printFleet prints the fleet's switches for a person.
func printFleet(w io.Writer, f *adminFleet) {
	fmt.Fprintf(w, "drain: %s\n", drainWords(f.Drain.All, f.Drain.Tools, f.Drain.Fallback))
	if s := setBy(f.Drain.By, f.Drain.At, f.Drain.Reason); s != "" {
		fmt.Fprintf(w, "  %s\n", s)
	}
	fmt.Fprintf(w, "local drain: %s (the answering instance's configuration file)\n", drainWords(f.LocalDrain.All, f.LocalDrain.Tools, f.LocalDrain.Fallback))
	if len(f.Canaries) == 0 {
		fmt.Fprintln(w, "canaries: none")
	} else {
		fmt.Fprintln(w, "canaries:")
		for _, tool := range sortedKeys(f.Canaries) {
			c := f.Canaries[tool]
			fmt.Fprintf(w, "  %s: %s\n", tool, canaryWords(c))
			if s := setBy(c.By, c.At, c.Reason); s != "" {
				fmt.Fprintf(w, "    %s\n", s)
			}
		}
	}
	if len(f.Rollbacks) == 0 {
		fmt.Fprintln(w, "rollbacks: none")
	} else {
		fmt.Fprintln(w, "rollbacks:")
		for _, tool := range sortedKeys(f.Rollbacks) {
			r := f.Rollbacks[tool]
			fmt.Fprintf(w, "  %s: fallback %s; running %d, confirmed %d, rejected %d, unknown %d, in flight %d\n", tool, orDash(r.Fallback),
				len(r.Running), len(r.Confirmed), len(r.Rejected), len(r.Unknown), len(r.InFlight))
			if s := setBy(r.By, r.At, r.Reason); s != "" {
				fmt.Fprintf(w, "    %s\n", s)
			}
		}
	}
	fmt.Fprintf(w, "switches version %d", f.Version)
	if !f.ReadAt.IsZero() {
		fmt.Fprintf(w, ", read at %s", f.ReadAt.UTC().Format(time.RFC3339))
	}
	fmt.Fprintln(w)
}

// sortedKeys returns the keys of m in order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// canaryWords says who a canary serves as tasks.
func canaryWords(c adminCanary) string {
	parts := []string{fmt.Sprintf("%d%% of requesters", c.Percent)}
	if len(c.Tenants) > 0 {
		parts = append(parts, "tenants "+strings.Join(c.Tenants, ", "))
	}
	if len(c.Principals) > 0 {
		parts = append(parts, "principals "+strings.Join(c.Principals, ", "))
	}
	return "tasks for " + strings.Join(parts, "; ") + " (the others get the tool's fallback)"
}

// canaryFlags are the flags of 'mcptask admin canary'.
type canaryFlags struct {
	percent    int
	percentSet bool
	tenants    []string
	principals []string
	off        bool
}

// cmdAdminCanary is 'mcptask admin canary'.
var cmdAdminCanary = &command{
	name:     "admin canary",
	synopsis: "TOOL [--percent N] [--tenant T ...] [--principal P ...] [--off] [--reason TEXT]",
	summary:  "limit a tool's new tasks to a canary, or lift it (/admin/canary)",
	help: `
'mcptask admin canary TOOL' limits the new task-augmented calls of TOOL,
fleet-wide, to a canary: the tenants (--tenant) and principals (--principal)
named, and --percent of the other requesters (chosen by a hash of the tool and
the requester: the same requester gets the same answer on every server, and
raising the percentage only adds requesters). The others get the tool's
fallback (refused, -32010 with data.reason "canary", unless the tool declares
another). Setting a canary replaces the tool's previous one. --off lifts it
(the promotion): every requester is served as tasks again. --reason says why.
It prints the tool's canary as the server now applies it.`,
	exitsText: adminExits,
	flags: func(a *app, fs *flag.FlagSet) {
		f := &a.cmd.admin.canary
		fs.Func("percent", "serve `N` percent (0 to 100) of the other requesters as tasks", func(v string) error {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 || n > 100 {
				return fmt.Errorf("want a whole number from 0 to 100, not %q", v)
			}
			f.percent, f.percentSet = n, true
			return nil
		})
		fs.Func("tenant", "serve this `TENANT`'s calls as tasks (repeatable)", func(v string) error {
			if v == "" {
				return fmt.Errorf("--tenant needs a tenant")
			}
			f.tenants = append(f.tenants, v)
			return nil
		})
		fs.Func("principal", "serve this `PRINCIPAL`'s calls as tasks (repeatable)", func(v string) error {
			if v == "" {
				return fmt.Errorf("--principal needs a principal")
			}
			f.principals = append(f.principals, v)
			return nil
		})
		fs.BoolVar(&f.off, "off", false, "lift the tool's canary: serve every requester as tasks")
		a.defineReason(fs, "the canary is set or lifted (recorded and audited)")
		a.defineAdminURL(fs, adminCanaryPath)
	},
	run: runAdminCanary,
}

// runAdminCanary runs 'mcptask admin canary'.
func runAdminCanary(a *app, ctx context.Context, pos []string) int {
	f := a.cmd.admin.canary
	if len(pos) != 1 || pos[0] == "" {
		return a.usage(usagef("name one tool: mcptask admin canary TOOL [--percent N] [--tenant T ...] [--principal P ...] [--off]"))
	}
	tool := pos[0]
	limits := f.percentSet || len(f.tenants) > 0 || len(f.principals) > 0
	switch {
	case f.off && limits:
		return a.usage(usagef("--off lifts the canary: give it without --percent, --tenant or --principal"))
	case !f.off && !limits:
		return a.usage(usagef("say whom the canary serves (--percent, --tenant, --principal), or lift it with --off"))
	}
	body := map[string]any{"tool": tool, "tenants": nonNil(f.tenants), "principals": nonNil(f.principals),
		"percent": f.percent, "reason": a.cmd.admin.reason, "off": f.off}
	raw, err := a.adminCall(ctx, http.MethodPut, adminCanaryPath, nil, body)
	if err != nil {
		return a.adminFailed(ctx, err)
	}
	var fl adminFleet
	if err := decodeAdmin(raw, &fl, adminCanaryPath, "the fleet's switches"); err != nil {
		return a.adminFailed(ctx, err)
	}
	if a.g.json {
		a.printRaw(raw)
		return exitOK
	}
	c, ok := fl.Canaries[tool]
	if !ok {
		fmt.Fprintf(a.stdout, "%s: no canary: its new calls are served as tasks (under the other switches)\n", tool)
		return exitOK
	}
	fmt.Fprintf(a.stdout, "%s: canary: %s\n", tool, canaryWords(c))
	if s := setBy(c.By, c.At, c.Reason); s != "" {
		fmt.Fprintf(a.stdout, "  %s\n", s)
	}
	return exitOK
}

// nonNil returns s, or an empty list for nil (JSON [] rather than null).
func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// cmdAdminRollback is 'mcptask admin rollback'.
var cmdAdminRollback = &command{
	name:     "admin rollback",
	synopsis: "TOOL [--reason TEXT] [--undo]",
	summary:  "roll a tool back fleet-wide and report what was in flight (/admin/rollback)",
	help: `
'mcptask admin rollback TOOL' rolls TOOL back, fleet-wide: its new
task-augmented calls get its fallback at once on every server (refused, -32010
with data.reason "rollback", unless the tool declares another), while the
tasks already created go on and stay readable, answerable and cancellable. The
server reconciles the unsettled operations of the tool's unfinished tasks with
the system of record and reports them: the tasks left running (and those held
for an approval or a handoff), the operations confirmed (applied), rejected
(not applied) and unknown (for an operator to settle). Rolling back again
reconciles again and reports the state then. --undo lifts the rollback: the
tool's new calls are served as tasks again. --reason says why.

Exits 0 when the rollback (or its undo) is recorded, whatever the report says
(--json prints it for scripts).`,
	exitsText: adminExits,
	flags: func(a *app, fs *flag.FlagSet) {
		fs.BoolVar(&a.cmd.admin.undo, "undo", false, "lift the tool's rollback: serve its new calls as tasks again")
		a.defineReason(fs, "the tool is rolled back, or the rollback undone (recorded and audited)")
		a.defineAdminURL(fs, adminRollbackPath)
	},
	run: runAdminRollback,
}

// maxListed bounds the IDs and keys a report prints of each list
// (--json has them all).
const maxListed = 20

// runAdminRollback runs 'mcptask admin rollback'.
func runAdminRollback(a *app, ctx context.Context, pos []string) int {
	if len(pos) != 1 || pos[0] == "" {
		return a.usage(usagef("name one tool: mcptask admin rollback TOOL [--reason TEXT] [--undo]"))
	}
	tool := pos[0]
	body := map[string]any{"tool": tool, "reason": a.cmd.admin.reason, "undo": a.cmd.admin.undo}
	raw, err := a.adminCall(ctx, http.MethodPost, adminRollbackPath, nil, body)
	if err != nil {
		return a.adminFailed(ctx, err)
	}
	var r adminRollback
	if err := decodeAdmin(raw, &r, adminRollbackPath, "a rollback report"); err != nil {
		return a.adminFailed(ctx, err)
	}
	if a.g.json {
		a.printRaw(raw)
		return exitOK
	}
	if a.cmd.admin.undo {
		fmt.Fprintf(a.stdout, "%s: rollback undone: its new calls are served as tasks again (under the other switches)\n", tool)
		return exitOK
	}
	printRollback(a.stdout, &r)
	return exitOK
}

// printRollback prints a rollback's report for a person.
func printRollback(w io.Writer, r *adminRollback) {
	fmt.Fprintf(w, "%s rolled back: its new task-augmented calls get the fallback %s\n", r.Tool, orDash(r.Fallback))
	if s := setBy(r.By, r.At, r.Reason); s != "" {
		fmt.Fprintf(w, "  %s\n", s)
	}
	fmt.Fprintf(w, "tasks left running: %s\n", listWords(r.Running))
	fmt.Fprintf(w, "  held for an approval or a handoff: %s\n", listWords(r.Held))
	fmt.Fprintf(w, "operations confirmed: %s\n", listWords(r.Confirmed))
	fmt.Fprintf(w, "operations rejected: %s\n", listWords(r.Rejected))
	fmt.Fprintf(w, "operations unknown: %s\n", listWords(r.Unknown))
	fmt.Fprintf(w, "operations in flight (their work runs): %s\n", listWords(r.InFlight))
}

// listWords says a list: its length, then its first items.
func listWords(l []string) string {
	if len(l) == 0 {
		return "0"
	}
	shown := l[:min(len(l), maxListed)]
	s := fmt.Sprintf("%d (%s", len(l), strings.Join(shown, ", "))
	if len(l) > len(shown) {
		s += fmt.Sprintf(", and %d more: --json lists them all", len(l)-len(shown))
	}
	return s + ")"
}

// adminShadowReport is the answer of GET /admin/shadow-report.
type adminShadowReport struct {
	Tool     string           `json:"tool"`
	Tasks    int              `json:"tasks"`
	Match    int              `json:"match"`
	Mismatch int              `json:"mismatch"`
	Errors   int              `json:"errors"`
	Rows     []adminShadowRow `json:"rows"`
}

// adminShadowRow compares one shadow task's projection with its job.
type adminShadowRow struct {
	TaskID    string `json:"taskId"`
	JobID     string `json:"jobId"`
	Projected string `json:"projected"`
	Actual    string `json:"actual"`
	Match     bool   `json:"match"`
	Error     string `json:"error"`
}

// cmdAdminShadowReport is 'mcptask admin shadow-report'.
var cmdAdminShadowReport = &command{
	name:     "admin shadow-report",
	synopsis: "TOOL",
	summary:  "compare a shadow (observe) tool's tasks with its job API (/admin/shadow-report)",
	help: `
'mcptask admin shadow-report TOOL' compares the newest tasks of TOOL, an HTTP
job tool in observe (shadow) mode, with its job API: for each task following
a job, the outcome the task projects (its status; a tool error as failed)
against the job's state the API gives now. It prints a table (task ID, job
ID, projected, actual, match) and the totals: tasks, match, mismatch and
errors (the job API could not be read). --json prints the report.`,
	exitsText: `  0    no mismatch and no error: the shadow tool agrees with its job API
  1    a mismatch, or a job the API could not be read for (the report says which)
  4    the server is unreachable, refuses the token (401, 403) or the
       request (e.g. TOOL is no HTTP job tool: its words are printed)
  5    usage error`,
	flags: func(a *app, fs *flag.FlagSet) {
		a.defineAdminURL(fs, adminShadowPath)
	},
	run: runAdminShadowReport,
}

// runAdminShadowReport runs 'mcptask admin shadow-report'.
func runAdminShadowReport(a *app, ctx context.Context, pos []string) int {
	if len(pos) != 1 || pos[0] == "" {
		return a.usage(usagef("name one tool: mcptask admin shadow-report TOOL"))
	}
	raw, err := a.adminCall(ctx, http.MethodGet, adminShadowPath, url.Values{"tool": {pos[0]}}, nil)
	if err != nil {
		return a.adminFailed(ctx, err)
	}
	var r adminShadowReport
	if err := decodeAdmin(raw, &r, adminShadowPath, "a shadow report"); err != nil {
		return a.adminFailed(ctx, err)
	}
	code := exitOK
	if r.Mismatch > 0 || r.Errors > 0 {
		code = exitToolError
	}
	if a.g.json {
		a.printRaw(raw)
		return code
	}
	if len(r.Rows) == 0 {
		fmt.Fprintf(a.stderr, "mcptask: no task of %s follows a job yet\n", pos[0])
	} else {
		tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "TASK ID\tJOB ID\tPROJECTED\tACTUAL\tMATCH")
		for _, row := range r.Rows {
			match := "yes"
			switch {
			case row.Error != "":
				match = "error: " + oneLine(row.Error)
			case !row.Match:
				match = "NO"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", row.TaskID, row.JobID, orDash(row.Projected), orDash(row.Actual), match)
		}
		tw.Flush()
	}
	fmt.Fprintf(a.stdout, "%s: %d tasks, %d match, %d mismatch, %d errors\n", pos[0], r.Tasks, r.Match, r.Mismatch, r.Errors)
	return code
}

// handoffFlags are the flags of 'mcptask admin handoff'.
type handoffFlags struct {
	text       string
	failed     bool
	structured string
}

// gateAnswer is the answer of a decision or a handoff: the task now.
type gateAnswer struct {
	TaskID        string `json:"taskId"`
	Status        string `json:"status"`
	StatusMessage string `json:"statusMessage"`
}

// gateExits says the exit codes of the commands that decide a held task.
const gateExits = `  0    done (or already done the same way): the task's status is printed
  2    refused: the task is no longer waiting for it (409), or you may not
       decide it (403: not an approver, or your own call)
  4    the server is unreachable, refuses the token, does not know the
       task, or refuses the request (its words are printed)
  5    usage error`

// cmdAdminHandoff is 'mcptask admin handoff'.
var cmdAdminHandoff = &command{
	name:     "admin handoff",
	synopsis: "TASK_ID --text TEXT [--failed] [--structured JSON]",
	summary:  "record the outcome of a task handed off to an operator (/admin/handoff)",
	help: `
'mcptask admin handoff ID --text TEXT' records by hand the outcome of the
task ID, held by a handoff fallback ("waiting for an operator to record the
outcome by hand"; 'mcptask approvals --kind handoff' lists them): the task
completes with TEXT as its result's text (and --structured JSON as its
structured content), or with --failed fails with TEXT as its error. The
operation is recorded on the server's ledger as confirmed (or rejected) by
you. An outcome can be recorded once.`,
	exitsText: gateExits,
	flags: func(a *app, fs *flag.FlagSet) {
		f := &a.cmd.admin.handoff
		fs.StringVar(&f.text, "text", "", "the outcome: the result's `TEXT` (or the failure's message, with --failed)")
		fs.BoolVar(&f.failed, "failed", false, "record a failure: the task fails with --text as its error")
		fs.StringVar(&f.structured, "structured", "", "the result's structured content: a `JSON` value; @file reads it from a file")
		a.defineAdminURL(fs, adminHandoffPath)
	},
	run: runAdminHandoff,
}

// runAdminHandoff runs 'mcptask admin handoff'.
func runAdminHandoff(a *app, ctx context.Context, pos []string) int {
	f := a.cmd.admin.handoff
	if len(pos) != 1 || pos[0] == "" {
		return a.usage(usagef("give one task ID: mcptask admin handoff TASK_ID --text TEXT"))
	}
	if strings.TrimSpace(f.text) == "" {
		return a.usage(usagef("say what the outcome is with --text TEXT"))
	}
	body := map[string]any{"taskId": pos[0], "text": f.text, "failed": f.failed}
	if f.structured != "" {
		if f.failed {
			return a.usage(usagef("--structured is a result's: it does not go with --failed"))
		}
		s := []byte(f.structured)
		if path, ok := strings.CutPrefix(f.structured, "@"); ok {
			b, err := os.ReadFile(path)
			if err != nil {
				return a.usage(usagef("--structured: %v", err))
			}
			s = b
		}
		if !json.Valid(s) {
			return a.usage(usagef("--structured must be JSON"))
		}
		body["structured"] = json.RawMessage(s)
	}
	raw, err := a.adminCall(ctx, http.MethodPost, adminHandoffPath, nil, body)
	if err != nil {
		if _, words := gateRefusal(err); words != "" {
			a.errorf("cannot record the outcome of task %s: %s", pos[0], words)
			return exitFailed
		}
		if unknownTask(err) {
			a.errorf("the server does not know task %s ('mcptask approvals --kind handoff' lists the tasks waiting for an operator)", pos[0])
			return exitConnection
		}
		return a.adminFailed(ctx, err)
	}
	return a.printGate(ctx, raw, adminHandoffPath)
}

// printGate prints the answer of a decision or a handoff: the task's
// status and message.
func (a *app) printGate(ctx context.Context, raw []byte, path string) int {
	var g gateAnswer
	if err := decodeAdmin(raw, &g, path, "a task"); err != nil {
		return a.adminFailed(ctx, err)
	}
	if a.g.json {
		a.printRaw(raw)
		return exitOK
	}
	fmt.Fprintf(a.stdout, "task %s is %s", g.TaskID, g.Status)
	if g.StatusMessage != "" {
		fmt.Fprintf(a.stdout, ": %s", oneLine(g.StatusMessage))
	}
	fmt.Fprintln(a.stdout)
	return exitOK
}
