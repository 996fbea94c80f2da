// Package wire declares, once, the names both task wires share: the JSON-RPC
// methods of tasks, the _meta keys mcptask itself defines (all under
// [MetaPrefix]) and the SEP-1686 key it honours. The per-revision shapes live
// in the sub-packages ext2026 (2026-07-28 extension) and v20251125
// (2025-11-25 experimental tasks); server and client both import them from
// here, so a name is never spelled twice.
package wire

// Methods of the tasks protocol. Which of them a wire serves is the wire's
// business: tasks/update belongs to 2026-07-28 only, tasks/result and
// tasks/list to 2025-11-25 only.
const (
	MethodToolsCall   = "tools/call"
	MethodTasksGet    = "tasks/get"
	MethodTasksUpdate = "tasks/update"
	MethodTasksCancel = "tasks/cancel"
	MethodTasksResult = "tasks/result"
	MethodTasksList   = "tasks/list"
	// MethodTasksDelete is mcptask's deletion of a terminal task and
	// everything it holds (SEP-1686 names it so), on both wires; a server
	// advertises it with ExtensionTasksDelete (2026-07-28) or
	// capabilities.tasks.delete (2025-11-25).
	MethodTasksDelete = "tasks/delete"
	// MethodOperationsList is mcptask's listing of the requester's own
	// domain operations on the ledger (see [Operation]), newest first,
	// on both wires; a server advertises it with ExtensionOperations
	// (capabilities.extensions of server/discover on 2026-07-28,
	// capabilities.experimental of initialize on 2025-11-25).
	MethodOperationsList = MetaPrefix + "operations/list"
	// MethodTaskStatus is the 2025-11-25 status notification.
	MethodTaskStatus = "notifications/tasks/status"
	// MethodSubscriptionsListen opens a 2026-07-28 notification stream;
	// its params.notifications.taskIds asks for MethodTasks notifications.
	MethodSubscriptionsListen = "subscriptions/listen"
	// MethodSubscriptionsAcknowledged is the first message of a listen
	// stream: what the server agreed to send.
	MethodSubscriptionsAcknowledged = "notifications/subscriptions/acknowledged"
	// MethodTasks is the 2026-07-28 task notification: the full task as
	// tasks/get returns it.
	MethodTasks = "notifications/tasks"
	// MetaSubscriptionID is the _meta key naming the listen stream (its
	// request's JSON-RPC ID) a notification belongs to.
	MetaSubscriptionID = "io.modelcontextprotocol/subscriptionId"
	// MethodElicit and MethodSample are the input requests a task may
	// make of its client.
	MethodElicit = "elicitation/create"
	MethodSample = "sampling/createMessage"
)

// IsTasksMethod reports whether m is one of the tasks/* methods (or
// mcptask's MethodOperationsList, served, limited and dispatched as they
// are).
func IsTasksMethod(m string) bool {
	switch m {
	case MethodTasksGet, MethodTasksUpdate, MethodTasksCancel, MethodTasksResult, MethodTasksList, MethodTasksDelete, MethodOperationsList:
		return true
	}
	return false
}

// MetaPrefix is the prefix of every _meta key mcptask defines.
const MetaPrefix = "io.mcptask/"

// Keys of a tools/call's _meta that carry a client-chosen idempotency key:
// a retried call with the same key (from the same requester) returns the
// task the first call created instead of starting the work again.
const (
	// MetaIdempotencyKey is mcptask's key: a string.
	MetaIdempotencyKey = MetaPrefix + "idempotency-key"
	// MetaSEP1686Task is the SEP-1686 draft's client-generated task
	// metadata, {"taskId": "..."}; its taskId is taken as the key.
	MetaSEP1686Task = "modelcontextprotocol.io/task"
)

// ExtensionIdempotency is the extension an mcptask server advertises (in
// capabilities.extensions of server/discover on 2026-07-28, and
// capabilities.experimental of initialize on 2025-11-25) to say that it
// honours MetaIdempotencyKey on every tools/call it answers with a task: a
// call re-sent with the same key returns the task the first one created,
// and the same key with another call is refused. A client may then re-send
// a create whose answer it never got.
const ExtensionIdempotency = MetaPrefix + "idempotency"

// ExtensionTasksDelete is the extension an mcptask server advertises in
// capabilities.extensions of server/discover on 2026-07-28 to say that it
// serves MethodTasksDelete (2025-11-25 says so with
// capabilities.tasks.delete, beside list and cancel).
const ExtensionTasksDelete = MetaPrefix + "tasks-delete"

// ExtensionTaskNotifications is the experimental capability an mcptask
// server advertises in initialize on 2025-11-25: it sends
// notifications/tasks/status, with the related-task _meta, for every
// status change of the tasks a session created or read (tasks/get), on
// the session's stdio connection or standalone Streamable HTTP GET stream.
// A client may then wait for them instead of polling at full rate. (On
// 2026-07-28, subscriptions/listen with notifications.taskIds is the
// standard way, acknowledged per stream.)
const ExtensionTaskNotifications = MetaPrefix + "task-notifications"

// ExtensionOperations is the extension an mcptask server advertises to
// say that it serves MethodOperationsList: in capabilities.extensions of
// server/discover on 2026-07-28, in capabilities.experimental of
// initialize on 2025-11-25. Every mcptask server does; a server that
// does not advertise it answers the method as not found.
const ExtensionOperations = MetaPrefix + "operations"

// EffectCheckSetting is the setting of ExtensionOperations ({"effectCheck":
// true}) by which a server says that it honours MetaRefuseUnknownEffects.
const EffectCheckSetting = "effectCheck"

// MetaRefuseUnknownEffects is the _meta key (io.mcptask/refuseUnknownEffects)
// of a tools/call whose requester wants it refused (CodeUnknownEffect,
// nothing run, no task created) while an earlier call of the tool (or of
// the tool a job tool's call would start) left an operation in state
// unknown on the ledger: the check a client would otherwise make by
// listing its operations first, made inside the call. A retry of a call
// that created its task already (its idempotency key) is not refused.
const MetaRefuseUnknownEffects = MetaPrefix + "refuseUnknownEffects"

// CodeUnknownEffect is the JSON-RPC error code of a tools/call refused for
// MetaRefuseUnknownEffects: data {"tool": T, "operations": [ListedOperation,
// ...]} (newest first).
const CodeUnknownEffect = -32018

// CodeTaskNotTerminal is the JSON-RPC error code of a tasks/delete of a
// task that is still working or waiting for input: it must be cancelled
// (tasks/cancel) first. Its data is {"reason": ReasonNotTerminal,
// "status": ...}.
const CodeTaskNotTerminal = -32011

// ReasonNotTerminal is the reason in the data of a CodeTaskNotTerminal
// error.
const ReasonNotTerminal = "task_not_terminal"

// CodeCancelRefused is the JSON-RPC error code of a tasks/cancel that the
// system doing the task's work refused, or could not be told of (e.g. a
// job API that answered the cancel request with HTTP 400): the task was
// not cancelled and goes on; its status message says why. Its data is
// {"reason": ReasonCancelRefused, "detail": ...}. (Both wires allow it:
// 2025-11-25 must not answer a cancel it did not carry out, and on
// 2026-07-28 a cancel is cooperative.)
const CodeCancelRefused = -32012

// ReasonCancelRefused is the reason in the data of a CodeCancelRefused
// error.
const ReasonCancelRefused = "cancel_refused"

// MetaTaskSupport is the key under which an mcptask server states each
// tool's task support ("forbidden", "optional", "required") in the _meta
// of the tools of a 2026-07-28 tools/list answer, where the extension has
// no execution.taskSupport: a client learns whether a call of the tool
// will be answered with a task (and so may be re-sent with its key).
const MetaTaskSupport = MetaPrefix + "taskSupport"

// Private _meta keys: they never leave the process that sets them.
const (
	// MetaTaskParam carries a 2025-11-25 tools/call's `task` parameter
	// across the go-sdk, which drops params fields it does not know (set
	// by the server's transport edge, removed before the handler runs).
	MetaTaskParam = MetaPrefix + "task-param"
	// MetaRerun marks a server's in-process re-run of a task's tool call.
	MetaRerun = MetaPrefix + "rerun"
)

// CodeLimitExceeded is the JSON-RPC error code of a request refused by a
// per-requester limit (a code of the range JSON-RPC leaves to servers; the
// specifications define none for this). Its data is {"reason": ...,
// "limit": ..., "retryAfterMs": ...}.
const CodeLimitExceeded = -32000

// CodeRejectedByTransport is the go-sdk's JSON-RPC error code for a
// request its transport could not deliver or whose answer it could not
// read ("rejected by transport"): no answer of the server's.
const CodeRejectedByTransport = -32005

// CodeUnavailable is the JSON-RPC error code of a request the server
// could not serve because its task store is briefly unreachable (a
// database restart, a failover): the request may be sent again after
// data.retryAfterMs, and a task the client waits for runs on. Its data is
// {"reason": ReasonStoreUnavailable, "retryAfterMs": ...}. (Not -32003
// or -32004: the go-sdk takes those for a connection closing, and closes
// the session.)
const CodeUnavailable = -32010

// The reasons of a CodeUnavailable error.
const (
	// ReasonStoreUnavailable: the task store is briefly unreachable; the
	// request may be sent again after data.retryAfterMs.
	ReasonStoreUnavailable = "store_unavailable"
	// ReasonDraining: the operator stopped new tasks of the tool
	// (data.tool), or of every tool; existing tasks are not affected.
	ReasonDraining = "draining"
)

// The reasons in the data of a CodeLimitExceeded error.
const (
	// ReasonRateLimited: the requester sent requests (or created tasks)
	// faster than allowed; data.retryAfterMs says when one will pass.
	ReasonRateLimited = "rate_limited"
	// ReasonTooManyActiveTasks: the requester has as many unfinished
	// tasks as allowed.
	ReasonTooManyActiveTasks = "too_many_active_tasks"
	// ReasonTooManyStreams: the requester holds as many open
	// subscriptions/listen streams with task IDs as allowed.
	ReasonTooManyStreams = "too_many_streams"
)

// MetaOperation is the _meta key under which tasks/get carries, on both
// wires, the task's latest domain operation on the ledger (an
// [Operation]): what the downstream system confirmed of the task's side
// effect, apart from the task's status. Absent when the task recorded
// none.
const MetaOperation = MetaPrefix + "operation"

// MetaCorrelation is the _meta key under which tasks/get carries, on both
// wires, the host correlation keys of the call that created the task: an
// object of strings, each a key the server reads from the call's _meta
// (mcptask.Options.CorrelationKeys, by default MetaClaudeCodeToolUseID)
// and its value, e.g. {"claudecode/toolUseId": "toolu_01…"}. Absent when
// the call carried none of them.
const MetaCorrelation = MetaPrefix + "correlation"

// MetaLook is the _meta key by which a client marks a tasks/get as a
// one-time look (true), e.g. 'mcptask status', not a poll of a task it
// waits for: the server does not count it toward the requester's poll
// pacing (the raised pollIntervalMs that answers polls faster than
// suggested), and answers the interval it suggests at the time.
const MetaLook = MetaPrefix + "look"

// MetaOutcome is the _meta key under which tasks/get carries, on both
// wires, how a finished task ended: "ok", "tool_error" (it completed with
// a result that says isError: true; the 2025-11-25 wire shows such a task
// as failed), "failed" or "cancelled". Absent while the task runs.
const MetaOutcome = MetaPrefix + "outcome"

// MetaLinks is the _meta key under which tasks/get carries, on both
// wires, links about the task that its tool gives (mcptask.ToolOptions.Links,
// e.g. the page of its job in a CI server): an object of http(s) URLs by
// short name, such as {"build": "https://ci.example.com/#/builds/57"}.
// Absent when the tool gives none (yet).
const MetaLinks = MetaPrefix + "links"

// MetaClaudeCodeToolUseID is the _meta key of a tools/call in which Claude
// Code sends the ID of the tool use the call answers: the default host
// correlation key (see MetaCorrelation).
const MetaClaudeCodeToolUseID = "claudecode/toolUseId"

// Operation is the value of MetaOperation.
type Operation struct {
	// Key is the operation's key on the ledger.
	Key string `json:"key"`
	// State is intended, submitted, confirmed, rejected or unknown.
	State string `json:"state"`
	// Receipt is the downstream system's reference, once submitted.
	Receipt string `json:"receipt,omitempty"`
	// Effect is the short description of the intended effect.
	Effect string `json:"effect,omitempty"`
	// ReconciledAt is when a reconciliation last asked the system of
	// record (RFC 3339, UTC), absent if never.
	ReconciledAt string `json:"reconciledAt,omitempty"`
}

// ListOperationsParams are the params of MethodOperationsList. Every
// field is optional.
type ListOperationsParams struct {
	// State, if set, selects the operations in that state only
	// (intended, submitted, confirmed, rejected or unknown; anything else
	// is refused as invalid params).
	State string `json:"state,omitempty"`
	// TaskID, if set, selects the operations of that task only.
	TaskID string `json:"taskId,omitempty"`
	// Cursor continues a listing: the nextCursor of the previous page.
	Cursor string `json:"cursor,omitempty"`
}

// ListedOperation is one operation of a MethodOperationsList answer: the
// [Operation] shape tasks/get carries, and where it comes from.
type ListedOperation struct {
	Operation
	// TaskID is the task whose work recorded it (which may have expired
	// or been deleted since: the ledger's retention is its own).
	TaskID string `json:"taskId"`
	// Tool is the task's tool.
	Tool string `json:"tool,omitempty"`
	// Object and ObjectVersion name what the effect acts on, if known.
	Object        string `json:"object,omitempty"`
	ObjectVersion string `json:"objectVersion,omitempty"`
	// Detail is what the last change said, short.
	Detail string `json:"detail,omitempty"`
	// Correlation is the host correlation keys of the call that created
	// its task (see MetaCorrelation), absent when none.
	Correlation map[string]string `json:"correlation,omitempty"`
	// CreatedAt and UpdatedAt are RFC 3339 UTC timestamps.
	CreatedAt string `json:"createdAt"`
	UpdatedAt string `json:"updatedAt"`
}

// ListOperationsResult is the answer of MethodOperationsList: a page of
// the requester's operations, newest first, and the cursor of the next
// page (absent at the end).
type ListOperationsResult struct {
	Operations []ListedOperation `json:"operations"`
	NextCursor string            `json:"nextCursor,omitempty"`
}

// MetaLog is the _meta key under which tasks/get carries, on both wires,
// the link to the task's log (a [LogLink]) once the task's work logged a
// line, and under which a resources/read of the log answers the page's
// position (a [LogPage]).
const MetaLog = MetaPrefix + "log"

// LogURITemplate is the URI template (RFC 6570) of a task's log
// resource: resources/read of it, by the task's owner only, answers the
// log's lines as text/plain, one per line, after the sequence number
// cursor (absent: from the oldest line kept), at most limit of them
// (absent: LogPageLines); format=json answers application/json instead
// (a [LogLines]).
const LogURITemplate = "mcptask://tasks/{taskId}/log{?cursor,limit,format}"

// LogURI returns the URI of the log of the task id.
func LogURI(id string) string { return "mcptask://tasks/" + id + "/log" }

// LogPageLines is the number of lines a resources/read of a task's log
// answers when it gives no limit.
const LogPageLines = 500

// LogLink is the value of MetaLog in tasks/get.
type LogLink struct {
	// URI is the log's resource.
	URI string `json:"uri"`
	// Last is the sequence number of the latest line logged.
	Last int64 `json:"last"`
	// Dropped is how many lines the log dropped to stay within its caps.
	Dropped int64 `json:"dropped,omitempty"`
}

// LogPage is the value of MetaLog in the answer of a resources/read of a
// task's log.
type LogPage struct {
	// Next is the cursor to read on from (the sequence number of the
	// last line given, or of the last line dropped).
	Next int64 `json:"next"`
	// Last is the sequence number of the latest line logged.
	Last int64 `json:"last"`
	// Missed is how many lines after the cursor were dropped before
	// they were read.
	Missed int64 `json:"missed,omitempty"`
	// Dropped is how many lines the log dropped in all.
	Dropped int64 `json:"dropped,omitempty"`
	// More reports that lines after this page are there already.
	More bool `json:"more,omitempty"`
	// Status is the task's status when the page was read: once it is
	// terminal and More is false, the log is complete (the work's lines
	// are written before its outcome).
	Status string `json:"status"`
}

// LogLines is the application/json content of a task log's page
// (format=json).
type LogLines struct {
	// Lines are the page's lines.
	Lines []LogLine `json:"lines"`
}

// LogLine is one line of a task's log.
type LogLine struct {
	// Seq is the line's sequence number.
	Seq int64 `json:"seq"`
	// Time is when it was logged (RFC 3339, UTC).
	Time string `json:"time"`
	// Stream names where it came from: stdout, stderr, log, ...
	Stream string `json:"stream,omitempty"`
	// Text is the line.
	Text string `json:"text"`
}

// ResultURITemplate is the URI template of a task's result resource: a
// completed task whose result is larger than the server's threshold is
// answered (tasks/get on 2026-07-28, tasks/result on 2025-11-25) with a
// result whose content is one resource_link to it, and resources/read of
// it, by the task's owner only, answers the whole result (the
// CallToolResult's JSON, application/json).
const ResultURITemplate = "mcptask://tasks/{taskId}/result"

// ResultURI returns the URI of the result of the task id.
func ResultURI(id string) string { return "mcptask://tasks/" + id + "/result" }

// MetaResultLink is the _meta key of a result answered as a link to its
// resource (a [ResultLink]).
const MetaResultLink = MetaPrefix + "result-link"

// ResultLink is the value of MetaResultLink.
type ResultLink struct {
	// URI is the result's resource.
	URI string `json:"uri"`
	// Size is the result's size in bytes (its JSON).
	Size int `json:"size"`
}

// CodeNotApproved is the error code of a task whose approval was denied
// or expired (io.mcptask/approval): its data is {"reason": "denied" or
// "expired", "by": the approver, "detail": why}.
const CodeNotApproved = -32016

// MetaApproval is the _meta key (io.mcptask/approval) of a task waiting
// for an approval, on its creation and in tasks/get: {"state":
// "pending", "approvers": [...], "expiresAt": RFC 3339, "reason": ...}.
const MetaApproval = "io.mcptask/approval"

// MetaHandoff is the _meta key (io.mcptask/handoff) of a task waiting
// for an operator to record its outcome by hand: {"state": "pending"}.
const MetaHandoff = "io.mcptask/handoff"

// MetaMode is the _meta key (io.mcptask/mode) by which tools/list tells
// the requester how its task-augmented calls of each task tool are served
// now under the fleet's switches (docs/rollout.md): {"mode": "task",
// "approval", "sync", "refuse", "handoff" or "jobs", "reason": "draining",
// "canary" or "rollback" when not as a task}.
const MetaMode = "io.mcptask/mode"
