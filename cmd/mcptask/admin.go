package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
)

// adminFlags are the flags of 'mcptask admin drain'.
type adminFlags struct {
	all      bool
	off      bool
	status   bool
	tools    []string
	fallback string
	url      string // --admin-url
}

// adminDrainState is the drain switch as /admin/drain reads it.
type adminDrainState struct {
	All             bool     `json:"all"`
	Tools           []string `json:"tools"`
	Fallback        string   `json:"fallback"`
	Source          string   `json:"source,omitempty"`
	ChangedBy       string   `json:"changedBy,omitempty"`
	OverridesConfig bool     `json:"overridesConfig,omitempty"`
}

// maxAdminAnswer bounds the answer of the admin endpoint read.
const maxAdminAnswer = 1 << 20

// cmdAdmin is 'mcptask admin'.
var cmdAdmin = &command{
	name:     "admin",
	synopsis: "drain [--all | --tool NAME ... | --off | --status] [--fallback refuse|sync]",
	summary:  "set or show the server's drain switch (mcptaskd's /admin/drain)",
	help: `
'mcptask admin drain' sets mcptaskd's drain switch without a restart: new
task-augmented calls of every tool (--all) or of the tools named (--tool,
repeatable) are refused, while existing tasks stay readable, answerable and
cancellable. --off lifts it; --status (or no flag) shows it. --fallback sync
answers a drained tool of optional task support synchronously instead of
refusing it (a required tool is refused all the same); without --fallback
the server's configured fallback applies.

The endpoint is the --url with its path replaced by /admin/drain, or
--admin-url. With authentication, the token (--token-file, MCPTASK_TOKEN...)
must carry mcptaskd's -admin-scope (default mcptask:admin); without
authentication, mcptaskd serves the endpoint on loopback only. --json prints
the switch as JSON. Exits 0 on success, 4 when the server is unreachable or
refuses (401, 403), 5 on a usage error.`,
	flags: func(a *app, fs *flag.FlagSet) {
		f := &a.cmd.admin
		fs.BoolVar(&f.all, "all", false, "drain every tool")
		fs.BoolVar(&f.off, "off", false, "lift the drain: accept new tasks of every tool")
		fs.BoolVar(&f.status, "status", false, "show the drain switch (the default)")
		fs.Func("tool", "drain this tool `NAME` (repeatable)", func(v string) error {
			if v == "" {
				return fmt.Errorf("--tool needs a tool name")
			}
			f.tools = append(f.tools, v)
			return nil
		})
		fs.StringVar(&f.fallback, "fallback", "", "what a drained tool's task-augmented calls get: `refuse` or sync (optional tools answer synchronously)")
		fs.StringVar(&f.url, "admin-url", "", "the admin endpoint `URL` (default: --url with the path /admin/drain)")
	},
	run: runAdmin,
}

func runAdmin(a *app, ctx context.Context, pos []string) int {
	f := a.cmd.admin
	if len(pos) != 1 || pos[0] != "drain" {
		return a.usage(usagef("give the admin command: mcptask admin drain [--all | --tool NAME ... | --off | --status]"))
	}
	set := 0
	for _, b := range []bool{f.all, f.off, f.status, len(f.tools) > 0} {
		if b {
			set++
		}
	}
	if set > 1 {
		return a.usage(usagef("give one of --all, --tool, --off and --status"))
	}
	switch f.fallback {
	case "", "refuse", "sync":
	default:
		return a.usage(usagef("--fallback must be refuse or sync, not %q", f.fallback))
	}
	if f.fallback != "" && (set == 0 || f.status) {
		return a.usage(usagef("--fallback goes with --all, --tool or --off"))
	}
	endpoint, err := a.adminURL()
	if err != nil {
		return a.usage(err)
	}
	token, from, err := a.g.bearerToken()
	if err != nil {
		a.errorf("%v", err)
		return exitUsage
	}
	method, body := http.MethodGet, []byte(nil)
	if set == 1 && !f.status {
		req := map[string]any{"all": f.all, "tools": append([]string{}, f.tools...)}
		if f.fallback != "" {
			req["fallback"] = f.fallback
		}
		method = http.MethodPut
		body, _ = json.Marshal(req)
	}
	st, err := adminRequest(ctx, endpoint, method, token, from, body)
	if err != nil {
		a.errorf("%v", err)
		return exitCodeOf(ctx, err)
	}
	if a.g.json {
		out, _ := json.Marshal(st)
		fmt.Fprintln(a.stdout, string(out))
		return exitOK
	}
	fmt.Fprintln(a.stdout, describeDrain(st))
	return exitOK
}

// adminURL returns the admin endpoint: --admin-url, else --url with the
// path /admin/drain.
func (a *app) adminURL() (string, error) {
	if a.g.stdio != "" && a.cmd.admin.url == "" {
		return "", usagef("admin talks to mcptaskd over HTTP: give --url or --admin-url, not --stdio")
	}
	raw := a.cmd.admin.url
	if raw == "" {
		raw = a.g.url
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", usagef("the admin URL must be an http:// or https:// URL, not %q", raw)
	}
	if a.cmd.admin.url == "" {
		u.Path, u.RawPath, u.RawQuery, u.Fragment = "/admin/drain", "", "", ""
	}
	return u.String(), nil
}

// adminRequest sends one request to the admin endpoint and returns the
// switch it answers with. from says where the token came from, for
// messages (never the token itself).
func adminRequest(ctx context.Context, endpoint, method, token, from string, body []byte) (*adminDrainState, error) {
	rctx, cancel := requestContext(ctx)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(rctx, method, endpoint, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, &adminError{msg: fmt.Sprintf("cannot reach the admin endpoint %s: %v", endpoint, err)}
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxAdminAnswer))
	if err != nil {
		return nil, &adminError{msg: fmt.Sprintf("reading the answer of %s: %v", endpoint, err)}
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error string `json:"error"`
		}
		msg := strings.TrimSpace(string(raw))
		if json.Unmarshal(raw, &e) == nil && e.Error != "" {
			msg = e.Error
		}
		if len(msg) > 500 {
			msg = msg[:500] + "..."
		}
		hint := ""
		switch {
		case resp.StatusCode == http.StatusUnauthorized && token == "":
			hint = " (give a token with --token-file, MCPTASK_TOKEN or MCPTASK_TOKEN_FILE)"
		case resp.StatusCode == http.StatusUnauthorized:
			hint = " (the token of " + from + ")"
		case resp.StatusCode == http.StatusForbidden && token != "":
			hint = " (the token of " + from + ")"
		}
		return nil, &adminError{msg: fmt.Sprintf("%s %s: HTTP %d: %s%s", method, endpoint, resp.StatusCode, msg, hint)}
	}
	var st adminDrainState
	if err := json.Unmarshal(raw, &st); err != nil {
		return nil, &adminError{msg: fmt.Sprintf("%s answered what is not a drain switch: %v", endpoint, err)}
	}
	return &st, nil
}

// adminError is a failed admin request (exit 4).
type adminError struct{ msg string }

func (e *adminError) Error() string { return e.msg }

// describeDrain says the switch in one line.
func describeDrain(st *adminDrainState) string {
	var what string
	switch {
	case st.All:
		what = "draining every tool: new tasks are refused"
	case len(st.Tools) > 0:
		what = "draining " + strings.Join(st.Tools, ", ") + ": new tasks of these tools are refused"
	default:
		return "not draining: new tasks are accepted"
	}
	if st.Fallback == "sync" {
		what += " (fallback sync: calls of optional tools are answered synchronously)"
	}
	if st.Source != "" {
		what += "; set by " + st.Source
		if st.ChangedBy != "" {
			what += " (" + st.ChangedBy + ")"
		}
	}
	return what
}
