package adapter

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/mcptask/mcptask/audit"
	"github.com/mcptask/mcptask/engine"
	"github.com/mcptask/mcptask/internal/rollout"
	"github.com/mcptask/mcptask/task"
	"github.com/mcptask/mcptask/wire"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// StartTask creates a task for the tools/call r of a tool whose policy
// the wire looked up once for the call ([Core.Tool]), on the wire of the
// given version, with the retention ttl asked for (nil: the default), and
// starts its work: the rest of the handler chain for that call. Both
// wires create tasks here: the idempotency key, the host correlation keys
// of the call's _meta (see [Core.Correlation]), the creation rate and the
// cap on unfinished tasks apply alike.
func (c *Core) StartTask(ctx context.Context, r *Request, tool ToolPolicy, version string, ttl *time.Duration) (*task.Task, error) {
	params := r.CallParams()
	raw, err := json.Marshal(params)
	if err != nil {
		return nil, InvalidParams("cannot encode the call's params: " + err.Error())
	}
	key, err := IdempotencyKey(params.Meta)
	if err != nil {
		return nil, err
	}
	corr, err := c.Correlation(params.Meta)
	if err != nil {
		return nil, err
	}
	owner := c.Requester(ctx, r.Req)
	ctx, span := c.startCreate(ctx, params.Meta, params.Name, version)
	t, err := c.create(ctx, creation{via: viaCall, owner: owner, tool: params.Name, p: tool, request: raw, version: version, ttl: ttl, key: key, corr: corr,
		work: c.traced(params.Meta, params.Name, firstAttempt, toolWork(r.Next, r.Method, r.Req))})
	endCreate(span, t, err)
	return t, err
}

// creation is what [Core.create] creates: a task of tool (its policy p)
// for owner, made by the call request (its params) on the wire version,
// with the retention ttl asked for (nil: the default), the idempotency
// key key, the host correlation keys corr, and its work.
type creation struct {
	via           int
	owner         task.Owner
	tool          string
	p             ToolPolicy
	request       json.RawMessage
	version, key  string
	ttl           *time.Duration
	corr          map[string]string
	work          engine.Work
	parent        *task.Task // the parent of a child (viaChild)
	gate, message string     // a child's own gate and its message
}

// create creates a task and starts its work, under the drain switch, the
// creation rate, the cap on unfinished tasks and the idempotency key:
// every task is created here, whatever asked for it.
func (c *Core) create(ctx context.Context, k creation) (*task.Task, error) {
	via, owner, tool, p, request, version, ttl, key, corr, work := k.via, k.owner, k.tool, k.p, k.request, k.version, k.ttl, k.key, k.corr, k.work
	spec := engine.StartSpec{
		Owner:          owner,
		Tool:           tool,
		Wire:           version,
		TTL:            ttl,
		Request:        request,
		IdempotencyKey: key,
		MaxActive:      c.limits.cfg.MaxActiveTasks,
		Queue:          p.Queue,
		MaxTTL:         p.MaxTTL,
		// The tool's work may have to record where it runs elsewhere
		// before the requester is told the task exists.
		AwaitExternalRef: p.AwaitExternalRef,
		Correlation:      corr,
	}
	mode := "task"
	d := c.rollout.Load().Decide(tool, owner, p.Fallback)
	if !d.Task() {
		if t := c.retryOf(ctx, owner, key, tool, request); t != nil {
			// An idempotent retry finds its task whatever the switches
			// say now: they decide new tasks only.
			c.eng.Audit().Reused(ctx, audit.TaskOf(t))
			return t, nil
		}
	}
	switch {
	case d.Task() || (via != viaCall && d.Why != rollout.Draining && d.Fallback == rollout.Jobs):
		if p.Approval != nil {
			spec.Gate, spec.GateMessage, mode = GateApproval, p.Approval(c.eng.Now()), "approval"
		}
		if k.gate != "" && p.Approval == nil {
			// A child's own gate (a workflow's approval step); a tool
			// with an approval of its own keeps it.
			spec.Gate, spec.GateMessage, mode = k.gate, k.message, strings.TrimPrefix(k.gate, engine.GatePrefix)
		}
	case d.Fallback == rollout.Handoff:
		spec.Gate, spec.GateMessage, mode = GateHandoff, HandoffMessage(d.Why), "handoff"
	default:
		c.eng.Observer().TaskRefused(tool, string(d.Why))
		c.eng.Observer().CallRouted(tool, "refused")
		return nil, NotServed(tool, d)
	}
	if k.parent != nil {
		// A child is its parent's work: the tree limits bound it, not
		// the requester's cap on unfinished tasks (its parent counts).
		spec.Parent, spec.Root, spec.MaxActive = k.parent.ID, k.parent.Root, 0
	} else if err := c.allowCreate(ctx, owner, tool); err != nil {
		// (A child is its parent's work, not a new call of its
		// requester: the creation rate applies to the parent.)
		return nil, err
	}
	t, err := c.eng.Start(ctx, spec, work)
	if errors.Is(err, engine.ErrIdempotencyConflict) {
		return nil, InvalidParams(fmt.Sprintf("the idempotency key %q was already used for another call (another tool or other arguments): a retry must repeat the call exactly; a new call needs a new key", key))
	}
	if errors.Is(err, engine.ErrTooManyActive) {
		return nil, c.tooManyActive(ctx, owner, tool)
	}
	if err != nil && c.eng.Transient(err) {
		c.log.Warn("creating task: the task store is briefly unavailable", "tool", tool, "err", err)
		return nil, StoreUnavailable()
	}
	if err != nil {
		c.log.Error("creating task", "tool", tool, "err", err)
		return nil, InternalError("the server could not create the task: " + err.Error())
	}
	c.eng.Observer().CallRouted(tool, mode)
	if spec.Gate != "" && t.Queue == spec.Gate && t.Attempts == 0 {
		c.eng.Audit().Gate(ctx, "", audit.TaskOf(t), strings.TrimPrefix(spec.Gate, engine.GatePrefix)+"_requested", spec.GateMessage)
	}
	return t, nil
}

// retryOf returns the task an idempotent retry of owner's call (tool,
// its params request) with the key key ("" for none) finds: made by the
// same call (tool and arguments) and not expired; nil when there is none.
func (c *Core) retryOf(ctx context.Context, owner task.Owner, key, tool string, request json.RawMessage) *task.Task {
	if key == "" {
		return nil
	}
	t, err := c.eng.Store().GetByKey(ctx, owner, key)
	if err != nil || t.Tool != tool || task.CallDigest(t.Tool, t.Request) != task.CallDigest(tool, request) || t.Expired(c.eng.Now()) {
		return nil
	}
	return t
}

// The ways a task is created (see Core.create): a task-augmented call,
// or the job tools, which stay open for tools whose fallback is jobs.
const (
	viaCall = iota
	viaJobs
	viaChild
)

// HandoffMessage is the status message of a task handed off to an
// operator because of why.
func HandoffMessage(why rollout.Why) string {
	return fmt.Sprintf("waiting for an operator to record the outcome by hand (handoff: %s)", why)
}

// RejectedArguments returns the answer to a call whose arguments the
// tool's input schema rejects (see [ToolPolicy.CheckArguments]): the tool
// error the go-sdk answers such a call with (the specs make bad arguments
// a tool execution error, so that the model can correct them), to be sent
// at once instead of creating a task that could only end with it. It
// returns nil when the tool (its policy tool) has no schema to check or
// the arguments pass.
func (c *Core) RejectedArguments(params *mcp.CallToolParamsRaw, tool ToolPolicy) *mcp.CallToolResult {
	check := tool.CheckArguments
	if check == nil {
		return nil
	}
	err := check(params.Arguments)
	if err == nil {
		return nil
	}
	var res mcp.CallToolResult
	res.SetError(errors.New(task.CapErrorMessage(fmt.Sprintf("validating \"arguments\": %v", err))))
	return &res
}

// toolWork returns the work of a task: the tool call through the rest of
// the server's handler chain, with its result or error translated for the
// store.
func toolWork(next mcp.MethodHandler, method string, req mcp.Request) engine.Work {
	return func(ctx context.Context) (json.RawMessage, error) {
		res, err := next(ctx, method, req)
		if err != nil {
			var ce *engine.CancelledError
			if errors.As(err, &ce) {
				return nil, ce // the work says the task is cancelled
			}
			var je *jsonrpc.Error
			if errors.As(err, &je) {
				return nil, &task.Error{Code: je.Code, Message: je.Message, Data: je.Data}
			}
			if errors.Is(err, context.Canceled) {
				return nil, &task.Error{Code: task.CodeInternalError, Message: "the tool stopped: " + err.Error()}
			}
			return nil, &task.Error{Code: task.CodeInternalError, Message: err.Error()}
		}
		if ctr, ok := res.(*mcp.CallToolResult); ok && ctr.InputRequests != nil {
			return nil, &task.Error{Code: task.CodeInternalError, Message: "the tool returned a multi round-trip input request while running as a task; a task asks for input with mcptask.FromContext(ctx).Elicit"}
		}
		return resultJSON(res)
	}
}

// resultJSON encodes a tool result for storage, without the envelope's
// resultType: the stored result is the plain CallToolResult.
func resultJSON(res mcp.Result) (json.RawMessage, error) {
	b, err := json.Marshal(res)
	if err != nil {
		return nil, &task.Error{Code: task.CodeInternalError, Message: "cannot encode the tool's result: " + err.Error()}
	}
	if !bytes.Contains(b, []byte(`"resultType"`)) {
		return b, nil
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(b, &m) != nil {
		return b, nil
	}
	if _, ok := m["resultType"]; !ok {
		return b, nil
	}
	delete(m, "resultType")
	return json.Marshal(m)
}

// MaxIdempotencyKey bounds the length of an idempotency key.
const MaxIdempotencyKey = 256

// IdempotencyKey returns the idempotency key of a call's _meta
// (wire.MetaIdempotencyKey, else SEP-1686's wire.MetaSEP1686Task), "" if
// none; a malformed one is an invalid-params error.
func IdempotencyKey(meta map[string]any) (string, error) {
	var key string
	if v, ok := meta[wire.MetaIdempotencyKey]; ok {
		s, ok := v.(string)
		if !ok {
			return "", invalidKey(wire.MetaIdempotencyKey + " must be a string")
		}
		key = s
	} else if v, ok := meta[wire.MetaSEP1686Task]; ok {
		m, _ := v.(map[string]any)
		s, ok := m["taskId"].(string)
		if !ok {
			return "", invalidKey(wire.MetaSEP1686Task + " must be an object with a string taskId")
		}
		key = s
	} else {
		return "", nil
	}
	if key == "" || len(key) > MaxIdempotencyKey {
		return "", invalidKey(fmt.Sprintf("an idempotency key must have 1 to %d characters", MaxIdempotencyKey))
	}
	return key, nil
}

func invalidKey(msg string) error {
	return InvalidParams("invalid idempotency key: " + msg)
}
