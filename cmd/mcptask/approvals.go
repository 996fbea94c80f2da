package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"
)

// adminHeld is a task held for an approval or a handoff, as GET
// /admin/approvals lists it (mcptask.Held).
type adminHeld struct {
	Kind          string          `json:"kind"`
	TaskID        string          `json:"taskId"`
	Tool          string          `json:"tool"`
	Owner         string          `json:"owner"`
	StatusMessage string          `json:"statusMessage"`
	CreatedAt     time.Time       `json:"createdAt"`
	ExpiresAt     time.Time       `json:"expiresAt"`
	Approvers     []string        `json:"approvers"`
	Arguments     json.RawMessage `json:"arguments"`
}

// cmdApprovals is 'mcptask approvals'.
var cmdApprovals = &command{
	name:     "approvals",
	synopsis: "[--kind approval|handoff]",
	summary:  "list the tasks waiting for an approval or an operator (mcptaskd's /admin/approvals)",
	help: `
'mcptask approvals' lists the tasks held, across owners, on every mcptaskd
sharing the store: those waiting for an approval (a tool whose rollout section
asks for one: decide them with 'mcptask approve ID' or 'mcptask deny ID') and
those handed off to an operator (a handoff fallback: record their outcome with
'mcptask admin handoff ID --text TEXT'), oldest first. --kind shows one kind.
For each: the kind, task ID, tool, owner, age, when an approval expires, its
approvers, and the call's arguments in short (--json prints them whole).

It talks to mcptaskd's admin endpoint like 'mcptask admin' (see 'mcptask help
admin'): --url with the path /admin/approvals, or --admin-url; a token with
the admin scope.`,
	exitsText: adminExits,
	flags: func(a *app, fs *flag.FlagSet) {
		fs.StringVar(&a.cmd.admin.kind, "kind", "", "list only the tasks waiting for an `approval` or a handoff")
		a.defineAdminURL(fs, adminApprovalsPath)
	},
	run: runApprovals,
}

// maxArguments bounds the arguments the table of approvals shows.
const maxArguments = 60

// runApprovals runs 'mcptask approvals'.
func runApprovals(a *app, ctx context.Context, pos []string) int {
	kind := a.cmd.admin.kind
	if len(pos) != 0 {
		return a.usage(usagef("approvals takes no arguments: got %q", pos))
	}
	switch kind {
	case "", "approval", "handoff":
	default:
		return a.usage(usagef("--kind must be approval or handoff, not %q", kind))
	}
	var q url.Values
	if kind != "" {
		q = url.Values{"kind": {kind}}
	}
	raw, err := a.adminCall(ctx, http.MethodGet, adminApprovalsPath, q, nil)
	if err != nil {
		return a.adminFailed(ctx, err)
	}
	var held []adminHeld
	if err := decodeAdmin(raw, &held, adminApprovalsPath, "a list of held tasks"); err != nil {
		return a.adminFailed(ctx, err)
	}
	if a.g.json {
		a.printRaw(raw)
		return exitOK
	}
	if len(held) == 0 {
		what := "an approval or an operator"
		switch kind {
		case "approval":
			what = "an approval"
		case "handoff":
			what = "an operator (handoff)"
		}
		fmt.Fprintf(a.stderr, "mcptask: no task is waiting for %s\n", what)
		return exitOK
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KIND\tTASK ID\tTOOL\tOWNER\tAGE\tEXPIRES\tAPPROVERS\tARGUMENTS")
	for _, h := range held {
		expires := "-"
		if !h.ExpiresAt.IsZero() {
			expires = h.ExpiresAt.UTC().Format(time.RFC3339)
		}
		age := "-"
		if !h.CreatedAt.IsZero() {
			age = formatElapsed(max(time.Since(h.CreatedAt), 0))
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", h.Kind, h.TaskID, orDash(h.Tool), ownerName(h.Owner), age, expires,
			orDash(strings.Join(h.Approvers, ",")), shortArguments(h.Arguments))
	}
	tw.Flush()
	return exitOK
}

// ownerName shows a task's owner: "TENANT/PRINCIPAL" of a token's user,
// "anonymous" for an unauthenticated requester, else as the server says.
func ownerName(o string) string {
	switch {
	case strings.HasPrefix(o, "user:"):
		return strings.TrimPrefix(o, "user:")
	case strings.HasPrefix(o, "anon:"):
		return "anonymous"
	}
	return orDash(o)
}

// shortArguments shows a call's arguments as compact JSON on one line,
// cut at maxArguments characters.
func shortArguments(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return "-"
	}
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return "(not JSON)"
	}
	s := b.String()
	if utf8.RuneCountInString(s) <= maxArguments {
		return s
	}
	r := []rune(s)
	return string(r[:maxArguments-1]) + "…"
}

// decideFlags are the flags shared by approve and deny.
func decideFlags(a *app, fs *flag.FlagSet) {
	a.defineReason(fs, "you decide so (recorded, audited, and in a denied task's status)")
	a.defineAdminURL(fs, adminDecidePath)
}

// cmdApprove is 'mcptask approve'.
var cmdApprove = &command{
	name:     "approve",
	synopsis: "TASK_ID [--reason TEXT]",
	summary:  "approve a task waiting for an approval: its work starts (/admin/decide)",
	help: `
'mcptask approve ID' approves the task ID, held for an approval ('mcptask
approvals' lists them), as the operator of your token ("anonymous" on a
loopback mcptaskd without authentication): its work starts, exactly once
across the fleet however many approve it. The tool's approvers (its rollout
section) may decide, and not the task's own requester unless the tool allows
self-approval. Approving a task already approved is no error. It prints the
task's status and message.`,
	exitsText: gateExits,
	flags:     decideFlags,
	run: func(a *app, ctx context.Context, pos []string) int {
		return runDecide(a, ctx, pos, true)
	},
}

// cmdDeny is 'mcptask deny'.
var cmdDeny = &command{
	name:     "deny",
	synopsis: "TASK_ID [--reason TEXT]",
	summary:  "deny a task waiting for an approval: it fails (/admin/decide)",
	help: `
'mcptask deny ID' denies the task ID, held for an approval ('mcptask
approvals' lists them), as the operator of your token: the task fails, its
status message naming you and --reason ("denied by NAME: REASON"). Denying a
task already denied is no error. It prints the task's status and message.`,
	exitsText: gateExits,
	flags:     decideFlags,
	run: func(a *app, ctx context.Context, pos []string) int {
		return runDecide(a, ctx, pos, false)
	},
}

// runDecide runs 'mcptask approve' (approve true) or 'mcptask deny'.
func runDecide(a *app, ctx context.Context, pos []string, approve bool) int {
	verb := "deny"
	if approve {
		verb = "approve"
	}
	if len(pos) != 1 || pos[0] == "" {
		return a.usage(usagef("give one task ID: mcptask %s TASK_ID [--reason TEXT] ('mcptask approvals' lists them)", verb))
	}
	id := pos[0]
	body := map[string]any{"taskId": id, "approve": approve, "reason": a.cmd.admin.reason}
	raw, err := a.adminCall(ctx, http.MethodPost, adminDecidePath, nil, body)
	if err != nil {
		switch status, words := gateRefusal(err); status {
		case http.StatusForbidden:
			a.errorf("you may not %s task %s: %s", verb, id, words)
			return exitFailed
		case http.StatusConflict:
			a.errorf("cannot %s task %s: %s", verb, id, words)
			return exitFailed
		}
		if unknownTask(err) {
			a.errorf("the server does not know task %s ('mcptask approvals' lists the tasks waiting for an approval)", id)
			return exitConnection
		}
		return a.adminFailed(ctx, err)
	}
	return a.printGate(ctx, raw, adminDecidePath)
}
