// Package events declares, once, the shapes of the MCP Events extension
// (io.modelcontextprotocol/events: events/list, events/poll,
// events/stream, events/subscribe, events/unsubscribe, their
// notifications and error codes) as mcptask serves and reads them on both
// task wires, and the event types mcptask offers for tasks. Server and
// client both import them from here.
//
// The shapes follow the newest text of the Events design
// (experimental-ext-triggers-events, docs/design-sketch-proposal.md) and
// the draft "Task Event Sources" (eventSource on CreateTaskResult).
package events

import (
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ExtensionID is the extension's identifier, under
// capabilities.extensions (servers also advertise capabilities.events,
// the key older clients read).
const ExtensionID = "io.modelcontextprotocol/events"

// The methods and notifications of the extension.
const (
	MethodList        = "events/list"
	MethodPoll        = "events/poll"
	MethodStream      = "events/stream"
	MethodSubscribe   = "events/subscribe"
	MethodUnsubscribe = "events/unsubscribe"

	NotifyActive     = "notifications/events/active"
	NotifyEvent      = "notifications/events/event"
	NotifyHeartbeat  = "notifications/events/heartbeat"
	NotifyError      = "notifications/events/error"
	NotifyTerminated = "notifications/events/terminated"

	// MetaSubscriptionID names the events/stream request (its JSON-RPC
	// ID) a notification belongs to.
	MetaSubscriptionID = "io.modelcontextprotocol/subscriptionId"
)

// The error codes of the extension (JSON-RPC server range).
const (
	CodeNotFound          = -32011
	CodeForbidden         = -32012
	CodeResourceExhausted = -32013
	CodeUnsupported       = -32014
	CodeCallbackEndpoint  = -32015
)

// The event types mcptask offers for tasks. Each takes the arguments of
// [TaskArgs]; a tool that declares an output schema also has an output
// type of its own, named ToolOutputType(tool).
const (
	// TypeStatus tells each status change of a task (working,
	// input_required, completed, failed, cancelled), with the outcome
	// and, on completion, the result.
	TypeStatus = "task.status"
	// TypeOutput tells what a task's work emits while it runs: its
	// intermediate results (the author API's Emit) and the log lines a
	// tool source publishes.
	TypeOutput = "task.output"
)

// ToolOutputType is the name of the output event type of a tool that
// declares the schema of its outputs.
func ToolOutputType(tool string) string { return tool + ".output" }

// The delivery modes.
const (
	ModePoll    = "poll"
	ModePush    = "push"
	ModeWebhook = "webhook"
)

// TaskArgs are the subscription arguments of the task event types: all of
// the requester's tasks, or those of one tool, or one task.
type TaskArgs struct {
	TaskID string `json:"taskId,omitempty"`
	Tool   string `json:"tool,omitempty"`
}

// EventType is one entry of events/list.
type EventType struct {
	Name          string          `json:"name"`
	Description   string          `json:"description,omitempty"`
	Delivery      []string        `json:"delivery"`
	InputSchema   json.RawMessage `json:"inputSchema"`
	PayloadSchema json.RawMessage `json:"payloadSchema,omitempty"`
}

// ListParams are the params of events/list.
type ListParams struct {
	mcp.ParamsBase
	Cursor string `json:"cursor,omitempty"`
}

// ListResult is the result of events/list.
type ListResult struct {
	mcp.ResultBase
	Events     []EventType `json:"events"`
	NextCursor string      `json:"nextCursor,omitempty"`
}

// Occurrence is one event delivered (EventOccurrence): an entry of
// events/poll, the params of notifications/events/event, the body of a
// webhook delivery.
type Occurrence struct {
	EventID   string          `json:"eventId"`
	Name      string          `json:"name"`
	Timestamp string          `json:"timestamp"`
	Data      json.RawMessage `json:"data"`
	Cursor    *string         `json:"cursor,omitempty"`
	Meta      map[string]any  `json:"_meta,omitempty"`
}

// PollParams are the params of events/poll (and, without MaxEvents, of
// events/stream).
type PollParams struct {
	mcp.ParamsBase
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	Cursor    *string         `json:"cursor"`
	MaxAgeMs  *int64          `json:"maxAgeMs,omitempty"`
	MaxEvents *int            `json:"maxEvents,omitempty"`
}

// PollResult is the result of events/poll.
type PollResult struct {
	mcp.ResultBase
	Events     []Occurrence `json:"events"`
	Cursor     *string      `json:"cursor"`
	Truncated  bool         `json:"truncated"`
	HasMore    bool         `json:"hasMore"`
	NextPollMs int64        `json:"nextPollMs"`
}

// Delivery is the delivery of events/subscribe and events/unsubscribe.
type Delivery struct {
	Mode   string `json:"mode,omitempty"`
	URL    string `json:"url"`
	Secret string `json:"secret,omitempty"`
}

// SubscribeParams are the params of events/subscribe. TTLMs absent means
// the server's default, null asks for no expiry.
type SubscribeParams struct {
	mcp.ParamsBase
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	Delivery  Delivery        `json:"delivery"`
	Cursor    *string         `json:"cursor,omitempty"`
	MaxAgeMs  *int64          `json:"maxAgeMs,omitempty"`
	TTLMs     json.RawMessage `json:"ttlMs,omitempty"`
}

// DeliveryStatus tells a subscription's delivery health on a refresh.
type DeliveryStatus struct {
	Active         bool    `json:"active"`
	LastDeliveryAt *string `json:"lastDeliveryAt"`
	LastError      *string `json:"lastError"`
	FailedSince    *string `json:"failedSince,omitempty"`
}

// SubscribeResult is the result of events/subscribe. RefreshBefore is
// null for no expiry.
type SubscribeResult struct {
	mcp.ResultBase
	ID            string  `json:"id"`
	RefreshBefore *string `json:"refreshBefore"`
	// Cursor is a safe-to-persist position: every event at or before it
	// was delivered or abandoned (absent when the server cannot tell).
	Cursor         *string         `json:"cursor,omitempty"`
	Truncated      bool            `json:"truncated"`
	DeliveryStatus *DeliveryStatus `json:"deliveryStatus,omitempty"`
}

// UnsubscribeParams are the params of events/unsubscribe.
type UnsubscribeParams struct {
	mcp.ParamsBase
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
	Delivery  Delivery        `json:"delivery"`
}

// EmptyResult is the result of events/unsubscribe and the final frame of
// an events/stream (StreamEventsResult).
type EmptyResult struct {
	mcp.ResultBase
}

// TaskEventSource is the eventSource of a CreateTaskResult (the draft
// "Task Event Sources"): the event type and arguments of the task's
// output, and the cursor before its first event.
type TaskEventSource struct {
	Name          string   `json:"name"`
	Input         TaskArgs `json:"input"`
	InitialCursor string   `json:"initialCursor,omitempty"`
}

// StatusData is the data of a task.status event.
type StatusData struct {
	TaskID        string          `json:"taskId"`
	Tool          string          `json:"tool"`
	Status        string          `json:"status"`
	StatusMessage string          `json:"statusMessage,omitempty"`
	Outcome       string          `json:"outcome,omitempty"`
	Result        json.RawMessage `json:"result,omitempty"`
	// ResultOmitted says the result was too large to carry: read it
	// with tasks/get (or tasks/result).
	ResultOmitted bool `json:"resultOmitted,omitempty"`
}

// OutputData is the data of a task.output event: a JSON value the work
// emitted (Data) or a line of text (Text).
type OutputData struct {
	TaskID string          `json:"taskId"`
	Tool   string          `json:"tool"`
	Stream string          `json:"stream,omitempty"`
	Data   json.RawMessage `json:"data,omitempty"`
	Text   string          `json:"text,omitempty"`
}

// ControlEnvelope is a webhook body that is not an event: a gap, the end
// of a subscription, or the verification challenge.
type ControlEnvelope struct {
	Type      string          `json:"type"`
	Cursor    string          `json:"cursor,omitempty"`
	Challenge string          `json:"challenge,omitempty"`
	Error     json.RawMessage `json:"error,omitempty"`
}
