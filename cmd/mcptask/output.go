package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/mcptask/mcptask/client"
	"github.com/mcptask/mcptask/wire"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// outcome is the end of one call or wait.
type outcome struct {
	taskID   string
	tool     string
	result   *mcp.CallToolResult
	err      error
	fallback string
	last     *client.TaskStatus // the last status seen, if any
}

// code returns the outcome's exit code.
func (o *outcome) code(ctx context.Context) int {
	if o.err == nil {
		if o.result != nil && o.result.IsError {
			return exitToolError
		}
		return exitOK
	}
	return exitCodeOf(ctx, o.err)
}

// jsonOutcome is what --json prints for the end of a call or wait.
type jsonOutcome struct {
	TaskID   string              `json:"taskId,omitempty"`
	Tool     string              `json:"tool,omitempty"`
	Status   string              `json:"status"` // completed, failed, cancelled, working, input_required, unknown
	Result   *mcp.CallToolResult `json:"result,omitempty"`
	Error    *jsonError          `json:"error,omitempty"`
	Fallback string              `json:"fallback,omitempty"`
	// Operation is the task's domain outcome on the server's ledger,
	// apart from its status (absent when the server shows none).
	Operation *wire.Operation `json:"operation,omitempty"`
	// ParentTaskID is the task whose work started this one as a child
	// (absent for none).
	ParentTaskID string `json:"parentTaskId,omitempty"`
	// Children are the tasks this task's work started, oldest first, as
	// the server lists them (absent for none).
	Children []wire.Child `json:"children,omitempty"`
	ExitCode int          `json:"exitCode"`
}

type jsonError struct {
	Code    int64           `json:"code,omitempty"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (a *app) jsonOf(ctx context.Context, o *outcome) jsonOutcome {
	j := jsonOutcome{TaskID: o.taskID, Tool: o.tool, Result: o.result, Fallback: o.fallback, ExitCode: o.code(ctx)}
	if o.last != nil {
		j.Operation = o.last.Operation
		j.ParentTaskID, j.Children = o.last.Parent, o.last.Children
	}
	switch j.ExitCode {
	case exitOK, exitToolError:
		j.Status = "completed"
	case exitFailed:
		j.Status = "failed"
	case exitCancelled:
		j.Status = "cancelled"
	case exitSampling:
		j.Status = "input_required"
	case exitDeadline, exitInterrupted:
		j.Status = "working"
		if o.last != nil && !o.last.Terminal() {
			j.Status = o.last.Status
		}
	default:
		j.Status = "unknown"
	}
	if o.last != nil && o.last.Terminal() && j.Status != "unknown" {
		// The task's status is the server's word, as 'mcptask status' shows
		// it: on the 2025-11-25 wire a result with isError: true comes from
		// a task the server marked failed.
		j.Status = o.last.Status
	}
	if o.err != nil {
		j.Error = &jsonError{Message: o.err.Error()}
		var te *client.TaskError
		var je *jsonrpc.Error
		switch {
		case errors.As(o.err, &te):
			j.Error = &jsonError{Code: te.Code, Message: te.Message}
			if json.Valid(te.Data) {
				j.Error.Data = te.Data
			}
		case errors.As(o.err, &je):
			j.Error = &jsonError{Code: je.Code, Message: je.Message}
			if json.Valid(je.Data) {
				j.Error.Data = je.Data
			}
		}
	}
	return j
}

// report prints an outcome (the result on stdout, what went wrong on
// stderr) and returns its exit code.
func (a *app) report(ctx context.Context, o *outcome) int {
	code := o.code(ctx)
	if a.g.json {
		a.printJSON(a.jsonOf(ctx, o))
		switch code {
		case exitOK, exitToolError:
		case exitInterrupted, exitDeadline:
			a.notef("%s", a.stillRunningHint(o, code))
		default:
			a.printHuman(o, code) // on stderr only
		}
		return code
	}
	a.printHuman(o, code)
	return code
}

// printHuman prints an outcome for a person: the result or what went
// wrong, then, when the server shows one, the task's status and its
// domain outcome on a line of their own.
func (a *app) printHuman(o *outcome, code int) {
	a.printOutcome(o, code)
	if o.last != nil && o.last.Operation != nil {
		a.notef("mcptask: task: %s · effect: %s", o.last.Status, effectText(o.last.Operation))
	}
}

// effectText says what a domain operation's state means for whoever
// would retry.
func effectText(op *wire.Operation) string {
	receipt := ""
	if op.Receipt != "" {
		receipt = " (receipt " + op.Receipt + ")"
	}
	switch op.State {
	case "intended":
		return "intended — recorded before the side effect; it may not have started: reconcile before retrying"
	case "submitted":
		return "submitted" + receipt + " — not confirmed yet by the system of record"
	case "confirmed":
		return "confirmed" + receipt
	case "rejected":
		return "rejected" + receipt + " — not applied"
	case "unknown":
		return "unknown" + receipt + " — reconcile before retrying"
	}
	return op.State + receipt
}

// printOutcome prints the result of an outcome, or what went wrong.
func (a *app) printOutcome(o *outcome, code int) {
	task := "the call"
	if o.taskID != "" {
		task = "task " + o.taskID
	}
	switch code {
	case exitOK:
		printResult(a.stdout, o.result)
	case exitToolError:
		printResult(a.stdout, o.result)
		a.errorf("%s completed with a tool error (isError: true)", describe(o.tool, task))
	case exitFailed:
		var te *client.TaskError
		var je *jsonrpc.Error
		switch {
		case errors.Is(o.err, client.ErrCancelRefused):
			reason := o.err.Error()
			var data struct {
				Detail string `json:"detail"`
			}
			if errors.As(o.err, &je) && json.Unmarshal(je.Data, &data) == nil && data.Detail != "" {
				reason = data.Detail
			}
			a.errorf("%s was not cancelled: %s; it goes on (the system doing its work refused the cancel)", task, reason)
		case errors.Is(o.err, client.ErrNotTerminal):
			a.errorf("delete refused: %s is still running; cancel it first (%s cancel %s), then delete it", task, a.selfCommand(), o.taskID)
		case errors.As(o.err, &te):
			a.errorf("%s failed: %s (JSON-RPC error %d)%s", describe(o.tool, task), te.Message, te.Code, dataSuffix(te.Data))
		case errors.As(o.err, &je) && o.tool == "":
			a.errorf("the server refused the request about %s: %s (JSON-RPC error %d)%s", task, je.Message, je.Code, dataSuffix(je.Data))
		case errors.As(o.err, &je):
			a.errorf("the server refused the call of %s: %s (JSON-RPC error %d)%s", o.tool, je.Message, je.Code, dataSuffix(je.Data))
		default:
			a.errorf("%s failed: %v", describe(o.tool, task), o.err)
		}
	case exitCancelled:
		a.errorf("%s was cancelled", describe(o.tool, task))
	case exitSampling:
		a.notef("mcptask: stopped waiting: %s still waits for an LLM completion; answer it from a host, or wait on with: %s wait --wait-sampling %s",
			task, a.selfCommand(), o.taskID)
	case exitUsage:
		var ue *usageError
		if errors.As(o.err, &ue) {
			a.errorf("%v", ue)
		} // else: said when it was found (an answer that does not fit)
	case exitDeadline, exitInterrupted:
		if code == exitDeadline && o.taskID != "" {
			fmt.Fprintln(a.stdout, o.taskID)
		}
		a.notef("%s", a.stillRunningHint(o, code))
	default:
		if errors.Is(o.err, client.ErrTaskNotFound) {
			a.errorf("%s: not found on the server (unknown ID, expired, or started by someone else)", task)
			return
		}
		a.errorf("%v", o.err)
	}
}

// stillRunningHint says how to pick up a task whose wait stopped.
func (a *app) stillRunningHint(o *outcome, code int) string {
	why := "interrupted"
	if code == exitDeadline {
		why = "deadline passed"
		if a.g.timeout > 0 {
			why = fmt.Sprintf("still running after --timeout %v", a.g.timeout)
		}
	}
	if o.taskID == "" {
		return "mcptask: " + why + " before the server answered the call"
	}
	s := fmt.Sprintf("mcptask: %s; task %s keeps running on the server.\nmcptask: wait for it again with: %s wait %s",
		why, o.taskID, a.selfCommand(), o.taskID)
	if a.g.journalPath() != "" {
		s += fmt.Sprintf("\nmcptask: or finish every task in the journal with: %s resume", a.selfCommand())
	}
	return s
}

// selfCommand is "mcptask" with the flags that name this server.
func (a *app) selfCommand() string {
	cmd := "mcptask"
	var fresh globals // what a new mcptask would use
	fresh.init(a.getenv)
	switch {
	case a.g.stdio != "":
		cmd += " --stdio " + shellQuote(a.g.stdio)
	case a.g.url != fresh.url:
		cmd += " --url " + shellQuote(a.g.url)
	}
	if a.g.journal != fresh.journal && a.g.journalPath() != "" {
		cmd += " --journal " + shellQuote(a.g.journal)
	}
	return cmd
}

func shellQuote(s string) string {
	if s != "" && !strings.ContainsAny(s, " \t\n'\"\\$`!*?[]{}()<>|&;#~") {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func describe(tool, task string) string {
	switch {
	case tool == "":
		return task
	case task == "the call":
		return tool
	}
	return tool + " (" + task + ")"
}

func dataSuffix(data []byte) string {
	if len(data) == 0 || string(data) == "null" {
		return ""
	}
	return "\n  data: " + string(data)
}

// printResult prints a tool result for a person: text as it is, other
// content summarized, structured content as JSON when there is no text.
func printResult(w io.Writer, r *mcp.CallToolResult) {
	if r == nil {
		return
	}
	hasText := false
	for _, c := range r.Content {
		switch c := c.(type) {
		case *mcp.TextContent:
			hasText = true
			fmt.Fprintln(w, strings.TrimSuffix(c.Text, "\n"))
		case *mcp.ImageContent:
			fmt.Fprintf(w, "[image %s, %d bytes]\n", orUnknown(c.MIMEType), len(c.Data))
		case *mcp.AudioContent:
			fmt.Fprintf(w, "[audio %s, %d bytes]\n", orUnknown(c.MIMEType), len(c.Data))
		case *mcp.ResourceLink:
			name := c.Title
			if name == "" {
				name = c.Name
			}
			fmt.Fprintf(w, "[resource link %s: %s]\n", name, c.URI)
		case *mcp.EmbeddedResource:
			if c.Resource == nil {
				fmt.Fprintln(w, "[resource]")
				continue
			}
			if c.Resource.Text != "" {
				hasText = true
				fmt.Fprintf(w, "[resource %s]\n%s\n", c.Resource.URI, strings.TrimSuffix(c.Resource.Text, "\n"))
			} else {
				fmt.Fprintf(w, "[resource %s, %s, %d bytes]\n", c.Resource.URI, orUnknown(c.Resource.MIMEType), len(c.Resource.Blob))
			}
		default:
			b, _ := json.Marshal(c)
			fmt.Fprintf(w, "[content %s]\n", b)
		}
	}
	if !hasText && r.StructuredContent != nil {
		b, err := json.MarshalIndent(r.StructuredContent, "", "  ")
		if err == nil {
			fmt.Fprintln(w, string(b))
		}
	}
}

func orUnknown(s string) string {
	if s == "" {
		return "of unknown type"
	}
	return s
}

// printJSON prints v as indented JSON on stdout.
func (a *app) printJSON(v any) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		a.errorf("encoding JSON: %v", err)
		return
	}
	fmt.Fprintln(a.stdout, string(b))
}

// jsonStatus is what --json prints for a task's status.
type jsonStatus struct {
	TaskID         string     `json:"taskId"`
	Status         string     `json:"status"`
	StatusMessage  string     `json:"statusMessage,omitempty"`
	Tool           string     `json:"tool,omitempty"`
	Target         string     `json:"target,omitempty"`
	CreatedAt      *time.Time `json:"createdAt,omitempty"`
	LastUpdatedAt  *time.Time `json:"lastUpdatedAt,omitempty"`
	TTLMs          *int64     `json:"ttlMs,omitempty"`
	PollIntervalMs *int64     `json:"pollIntervalMs,omitempty"`
	Error          string     `json:"error,omitempty"` // why the status is unknown
	// Operation is the task's domain outcome on the server's ledger.
	Operation *wire.Operation `json:"operation,omitempty"`
	// Log links the task's log (mcptask logs ID reads it).
	Log *wire.LogLink `json:"log,omitempty"`
	// Correlation is the host correlation keys of the call that created
	// the task (e.g. claudecode/toolUseId).
	Correlation map[string]string `json:"correlation,omitempty"`
	// Links are links about the task its tool gives (e.g. its job's page).
	Links map[string]string `json:"links,omitempty"`
	// Outcome is how the finished task ended (ok, tool_error, failed,
	// cancelled), as the server tells.
	Outcome string `json:"outcome,omitempty"`
	// ParentTaskID is the task whose work started this one as a child.
	ParentTaskID string `json:"parentTaskId,omitempty"`
	// Children are the tasks this task's work started, oldest first, as
	// the server lists them.
	Children []wire.Child `json:"children,omitempty"`
	// Tree is the tree below the task, read child by child (status
	// --tree); TreeCut says when its bounds left tasks out.
	Tree    []jsonTreeNode `json:"tree,omitempty"`
	TreeCut string         `json:"treeCut,omitempty"`
}

func jsonStatusOf(s *client.TaskStatus) jsonStatus {
	j := jsonStatus{TaskID: s.ID, Status: s.Status, StatusMessage: s.StatusMessage, Operation: s.Operation, Log: s.Log, Correlation: s.Correlation, Links: s.Links, Outcome: s.Outcome,
		ParentTaskID: s.Parent, Children: s.Children}
	if !s.CreatedAt.IsZero() {
		t := s.CreatedAt
		j.CreatedAt = &t
	}
	if !s.LastUpdatedAt.IsZero() {
		t := s.LastUpdatedAt
		j.LastUpdatedAt = &t
	}
	if s.TTL > 0 {
		ms := s.TTL.Milliseconds()
		j.TTLMs = &ms
	}
	if s.PollInterval > 0 {
		ms := s.PollInterval.Milliseconds()
		j.PollIntervalMs = &ms
	}
	return j
}

// printStatus prints a task's status for a person.
func printStatus(w io.Writer, s *client.TaskStatus, tool string) {
	fmt.Fprintf(w, "task %s\n", s.ID)
	row := func(k, v string) {
		if v != "" {
			fmt.Fprintf(w, "  %-9s %s\n", k+":", v)
		}
	}
	switch {
	case s.Outcome == "tool_error" && s.Status == "completed":
		row("status", "completed with a tool error (the tool reported isError: true)")
	case s.Outcome == "tool_error":
		row("status", s.Status+" (a tool error: the tool reported isError: true)")
	default:
		row("status", s.Status)
	}
	if s.Operation != nil {
		row("effect", effectText(s.Operation))
	}
	row("message", oneLine(s.StatusMessage))
	if s.Log != nil {
		row("log", fmt.Sprintf("%d lines logged (mcptask logs %s)", s.Log.Last, s.ID))
	}
	row("tool", tool)
	if s.Parent != "" {
		row("parent", s.Parent+" (the task whose work started this one)")
	}
	if len(s.Correlation) > 0 {
		var pairs []string
		for _, k := range slices.Sorted(maps.Keys(s.Correlation)) {
			pairs = append(pairs, k+"="+oneLine(s.Correlation[k]))
		}
		row("host", strings.Join(pairs, ", "))
	}
	for _, k := range slices.Sorted(maps.Keys(s.Links)) {
		row("link", k+" "+oneLine(s.Links[k]))
	}
	if !s.CreatedAt.IsZero() {
		row("created", fmt.Sprintf("%s (%s ago)", s.CreatedAt.Local().Format(time.DateTime), formatElapsed(time.Since(s.CreatedAt))))
	}
	if !s.LastUpdatedAt.IsZero() {
		row("updated", fmt.Sprintf("%s (%s ago)", s.LastUpdatedAt.Local().Format(time.DateTime), formatElapsed(time.Since(s.LastUpdatedAt))))
	}
	if s.TTL > 0 {
		row("kept for", s.TTL.String()+" after its last change")
	}
	if s.PollInterval > 0 {
		row("poll", "every "+s.PollInterval.String())
	}
}
