package mcptask

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/mcptask/mcptask/engine"
	"github.com/mcptask/mcptask/internal/adapter"
	"github.com/mcptask/mcptask/task"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// DefaultJobPrefix prefixes the names of the job tools (see
// [Server.AddJobTools]) when none is chosen: job_start, job_status, ...
const DefaultJobPrefix = "job_"

// JobStartArgs are the arguments of the job tool PREFIXstart.
type JobStartArgs struct {
	// Tool is the tool to run as a task.
	Tool string `json:"tool" jsonschema:"the name of the tool to run as a long job (a tool that supports tasks)"`
	// Arguments are the tool's arguments.
	Arguments map[string]any `json:"arguments,omitempty" jsonschema:"the tool's arguments, as for a direct call"`
	// IdempotencyKey, if set, makes a retry with the same key and the
	// same call return the job already started instead of a new one.
	IdempotencyKey string `json:"idempotencyKey,omitempty" jsonschema:"optional: a retry with the same key and call returns the same job"`
}

// JobArgs are the arguments of the job tools that name a job.
type JobArgs struct {
	// TaskID is the job's task ID, as PREFIXstart returned it.
	TaskID string `json:"taskId" jsonschema:"the job's taskId, as returned when it was started"`
}

// JobAnswerArgs are the arguments of the job tool PREFIXanswer.
type JobAnswerArgs struct {
	// TaskID is the job's task ID.
	TaskID string `json:"taskId" jsonschema:"the job's taskId"`
	// Answers maps each pending input request's key (from the status's
	// inputRequests) to its answer: for an elicitation
	// {"action": "accept", "content": {...}} (or "decline", "cancel").
	Answers map[string]any `json:"answers" jsonschema:"answers by input request key, e.g. {\"KEY\": {\"action\": \"accept\", \"content\": {...}}}"`
}

// JobStatus is the structured content the job tools answer with.
type JobStatus struct {
	TaskID        string `json:"taskId"`
	Tool          string `json:"tool"`
	Status        string `json:"status"`
	StatusMessage string `json:"statusMessage,omitempty"`
	// Done is true once the job has ended (completed, failed or
	// cancelled): PREFIXresult then gives its outcome.
	Done bool `json:"done"`
	// PollIntervalMs is how long to wait before asking again.
	PollIntervalMs int64 `json:"pollIntervalMs,omitempty"`
	// InputRequests are the questions the job waits for, by key
	// ({"method": "elicitation/create", "params": {...}}); answer them
	// with PREFIXanswer.
	InputRequests map[string]json.RawMessage `json:"inputRequests,omitempty"`
}

// JobToolNames returns the names of the job tools of prefix ("" means
// [DefaultJobPrefix]).
func JobToolNames(prefix string) []string {
	if prefix == "" {
		prefix = DefaultJobPrefix
	}
	return []string{prefix + "start", prefix + "status", prefix + "result", prefix + "cancel", prefix + "answer"}
}

// AddJobTools adds the job API, ordinary tools (no task support) that let
// a client without task support, such as a model in a host that declares
// none, drive long calls itself: PREFIXstart {tool, arguments} starts the
// tool as a task and returns its taskId; PREFIXstatus {taskId} tells its
// status, message and pending questions; PREFIXresult {taskId} gives the
// outcome once it has ended; PREFIXcancel {taskId} cancels it;
// PREFIXanswer {taskId, answers} answers its questions. prefix "" means
// [DefaultJobPrefix].
//
// A job is a task like any other: created through the same path as a
// task-augmented call (drain switch, limits, idempotency key, audit),
// owned by the requester of the PREFIXstart call (another requester's
// job answers as an unknown one), visible to tasks/get as well. Errors
// are tool errors (isError), which a model reads. Like AddTool it panics
// after [Server.Start].
func (s *Server) AddJobTools(prefix string) {
	if prefix == "" {
		prefix = DefaultJobPrefix
	}
	j := &jobTools{s: s, c: s.core, prefix: prefix}
	s.jobStart.Store(prefix + "start")
	AddTool(s, &mcp.Tool{Name: prefix + "start", Description: "Starts a long-running tool as a background job and returns its taskId at once. " +
		"Follow it with " + prefix + "status, collect the outcome with " + prefix + "result, stop it with " + prefix + "cancel."}, j.start, ToolOptions{})
	AddTool(s, &mcp.Tool{Name: prefix + "status", Description: "Tells a job's status (working, input_required, completed, failed, cancelled), its progress message, " +
		"and the questions it waits for (answer them with " + prefix + "answer)."}, j.status, ToolOptions{})
	AddTool(s, &mcp.Tool{Name: prefix + "result", Description: "Gives a finished job's result (the tool's own result); for a job still running, says so without waiting."}, j.result, ToolOptions{})
	AddTool(s, &mcp.Tool{Name: prefix + "cancel", Description: "Cancels a job."}, j.cancel, ToolOptions{})
	AddTool(s, &mcp.Tool{Name: prefix + "answer", Description: "Answers the questions a job in input_required waits for, by the keys " + prefix + "status lists."}, j.answer, ToolOptions{})
}

// jobTools are the handlers of the job API.
type jobTools struct {
	s      *Server
	c      *adapter.Core
	prefix string
}

func (j *jobTools) start(ctx context.Context, req *mcp.CallToolRequest, in JobStartArgs) (*mcp.CallToolResult, any, error) {
	args := json.RawMessage(`{}`)
	if in.Arguments != nil {
		b, err := json.Marshal(in.Arguments)
		if err != nil {
			return toolError("the arguments are not JSON: " + err.Error()), nil, nil
		}
		args = b
	}
	key := in.IdempotencyKey
	if key == "" {
		key, _ = adapter.IdempotencyKey(req.Params.Meta)
	}
	t, rejected, err := j.c.StartJob(ctx, req, in.Tool, args, key)
	switch {
	case err != nil:
		return toolError(errorText(err)), nil, nil
	case rejected != nil:
		return rejected, nil, nil
	}
	st := j.view(j.c.Requester(ctx, req), t)
	return j.answerWith(st, fmt.Sprintf("Started job %s (%s). Check it with %sstatus {\"taskId\": %q} in about %s; collect the outcome with %sresult.",
		t.ID, t.Tool, j.prefix, t.ID, time.Duration(st.PollIntervalMs)*time.Millisecond, j.prefix)), nil, nil
}

func (j *jobTools) status(ctx context.Context, req *mcp.CallToolRequest, in JobArgs) (*mcp.CallToolResult, any, error) {
	owner, t, res := j.load(ctx, req, in.TaskID, j.prefix+"status")
	if res != nil {
		return res, nil, nil
	}
	st := j.view(owner, t)
	return j.answerWith(st, j.describe(st)), nil, nil
}

func (j *jobTools) result(ctx context.Context, req *mcp.CallToolRequest, in JobArgs) (*mcp.CallToolResult, any, error) {
	owner, t, res := j.load(ctx, req, in.TaskID, j.prefix+"result")
	if res != nil {
		return res, nil, nil
	}
	st := j.view(owner, t)
	switch t.Status {
	case task.Completed:
		j.c.AuditOutcome(ctx, j.prefix+"result", owner, t)
		var out mcp.CallToolResult
		if err := json.Unmarshal(t.Result, &out); err != nil {
			return toolError("the job's stored result cannot be read: " + err.Error()), nil, nil
		}
		return &out, nil, nil
	case task.Failed:
		j.c.AuditOutcome(ctx, j.prefix+"result", owner, t)
		e := adapter.TaskError(t)
		return toolError(fmt.Sprintf("job %s (%s) failed: %s (code %d)", t.ID, t.Tool, e.Message, e.Code)), nil, nil
	case task.Cancelled:
		return toolError(fmt.Sprintf("job %s (%s) was cancelled; it has no result", t.ID, t.Tool)), nil, nil
	}
	return j.answerWith(st, "Not finished yet: "+j.describe(st)), nil, nil
}

func (j *jobTools) cancel(ctx context.Context, req *mcp.CallToolRequest, in JobArgs) (*mcp.CallToolResult, any, error) {
	owner, id, res := j.requester(ctx, req, in.TaskID)
	if res != nil {
		return res, nil, nil
	}
	t, err := j.c.Engine().Cancel(ctx, owner, id)
	var term *engine.TerminalError
	if errors.As(err, &term) {
		if t, err = j.c.Engine().Get(ctx, owner, id); err == nil {
			st := j.view(owner, t)
			return j.answerWith(st, fmt.Sprintf("Job %s had already ended (%s); nothing to cancel.", id, t.Status)), nil, nil
		}
	}
	if err != nil {
		return toolError(errorText(j.c.EngineError(ctx, j.prefix+"cancel", owner, id, err))), nil, nil
	}
	st := j.view(owner, t)
	return j.answerWith(st, fmt.Sprintf("Job %s (%s) is %s.", id, t.Tool, t.Status)), nil, nil
}

func (j *jobTools) answer(ctx context.Context, req *mcp.CallToolRequest, in JobAnswerArgs) (*mcp.CallToolResult, any, error) {
	owner, id, res := j.requester(ctx, req, in.TaskID)
	if res != nil {
		return res, nil, nil
	}
	if len(in.Answers) == 0 {
		return toolError("give answers: {\"KEY\": ANSWER} for the keys " + j.prefix + "status lists"), nil, nil
	}
	answers := make(map[string]json.RawMessage, len(in.Answers))
	for k, v := range in.Answers {
		b, err := json.Marshal(v)
		if err != nil {
			return toolError(fmt.Sprintf("answers[%q] is not JSON: %v", k, err)), nil, nil
		}
		answers[k] = b
	}
	t, ignored, err := j.c.Engine().Respond(ctx, owner, id, answers, adapter.CheckAnswer)
	var bad *engine.AnswerError
	var term *engine.TerminalError
	switch {
	case errors.As(err, &bad):
		return toolError(fmt.Sprintf("answers[%q]: %v; nothing was stored, and the job still waits for an answer", bad.Key, bad.Err)), nil, nil
	case errors.As(err, &term):
		return toolError(fmt.Sprintf("job %s has ended (%s): it needs no answer", id, term.Status)), nil, nil
	case err != nil:
		return toolError(errorText(j.c.EngineError(ctx, j.prefix+"answer", owner, id, err))), nil, nil
	}
	st := j.view(owner, t)
	msg := fmt.Sprintf("Answer delivered; job %s is %s.", id, t.Status)
	if len(ignored) > 0 {
		msg += fmt.Sprintf(" Ignored (no such pending question): %s.", strings.Join(ignored, ", "))
	}
	return j.answerWith(st, msg), nil, nil
}

// requester returns the requester of req and the parsed task ID, or the
// tool error to answer with.
func (j *jobTools) requester(ctx context.Context, req *mcp.CallToolRequest, raw string) (task.Owner, task.ID, *mcp.CallToolResult) {
	if err := j.c.AllowRequest(ctx, "tasks/get", req); err != nil {
		return "", "", toolError(errorText(err))
	}
	id, err := adapter.ParseID(raw)
	if err != nil {
		return "", "", toolError(errorText(err))
	}
	return j.c.Requester(ctx, req), id, nil
}

// load returns the requester's task raw, or the tool error to answer with
// (an unknown task, another requester's or an expired one alike).
func (j *jobTools) load(ctx context.Context, req *mcp.CallToolRequest, raw, method string) (task.Owner, *task.Task, *mcp.CallToolResult) {
	owner, id, res := j.requester(ctx, req, raw)
	if res != nil {
		return "", nil, res
	}
	t, err := j.c.Engine().Get(ctx, owner, id)
	if err != nil {
		return "", nil, toolError(errorText(j.c.EngineError(ctx, method, owner, id, err)))
	}
	return owner, t, nil
}

// view is the JobStatus of t as owner sees it.
func (j *jobTools) view(owner task.Owner, t *task.Task) JobStatus {
	t = j.c.PollInterval(owner, t, nil)
	st := JobStatus{TaskID: string(t.ID), Tool: t.Tool, Status: string(t.Status), StatusMessage: t.StatusMessage,
		Done: t.Status.Terminal(), PollIntervalMs: t.PollInterval.Milliseconds()}
	if t.Status == task.InputRequired {
		st.InputRequests = t.InputRequests
	}
	return st
}

// describe says st in words, for the model.
func (j *jobTools) describe(st JobStatus) string {
	s := fmt.Sprintf("Job %s (%s) is %s", st.TaskID, st.Tool, st.Status)
	if st.StatusMessage != "" {
		s += ": " + st.StatusMessage
	}
	s += "."
	switch {
	case st.Done:
		s += fmt.Sprintf(" Get its outcome with %sresult.", j.prefix)
	case len(st.InputRequests) > 0:
		q, _ := json.Marshal(st.InputRequests)
		s += fmt.Sprintf(" It waits for answers to %s; answer with %sanswer {\"taskId\": %q, \"answers\": {KEY: {\"action\": \"accept\", \"content\": {...}}}}.", q, j.prefix, st.TaskID)
	default:
		s += fmt.Sprintf(" Check again in about %s.", time.Duration(st.PollIntervalMs)*time.Millisecond)
	}
	return s
}

// answerWith is a tool result: text for the model, st as structured
// content.
func (j *jobTools) answerWith(st JobStatus, text string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}, StructuredContent: st}
}

// toolError is a tool result with isError set.
func toolError(msg string) *mcp.CallToolResult {
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: msg}}}
}

// errorText is the message of err (a JSON-RPC error's, with its reason).
func errorText(err error) string {
	var je *jsonrpc.Error
	if errors.As(err, &je) {
		msg := je.Message
		var data struct {
			Reason string `json:"reason"`
		}
		if json.Unmarshal(je.Data, &data) == nil && data.Reason != "" {
			msg += " (" + data.Reason + ")"
		}
		return msg
	}
	return err.Error()
}

// effectTool is the tool whose unknown effects a tools/call req would
// repeat: the tool a job tool's start names, else the tool called.
func (s *Server) effectTool(req mcp.Request) string {
	p, _ := req.GetParams().(*mcp.CallToolParamsRaw)
	if p == nil {
		return ""
	}
	if start, _ := s.jobStart.Load().(string); start != "" && p.Name == start {
		var in struct {
			Tool string `json:"tool"`
		}
		if json.Unmarshal(p.Arguments, &in) == nil && in.Tool != "" {
			return in.Tool
		}
	}
	return p.Name
}
