package wire

import (
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ExtensionApprovals is the extension (io.mcptask/approvals) an mcptask
// server advertises, in server/discover's extensions and in the
// experimental capabilities of initialize: it serves the approvers'
// methods below, and answers the calls of approval-gated tools with
// tasks that wait for an approval (_meta MetaApproval).
const ExtensionApprovals = MetaPrefix + "approvals"

// CodeDecided is the error code of MethodApprovalsDecide for an approval
// decided already the other way (or a task no longer waiting).
const CodeDecided = -32017

// The methods by which approvers decide approvals over MCP (an
// io.mcptask extension, see docs/rollout.md): the requester is the
// approver, admitted by its principal or by a scope its token carries.
const (
	// MethodApprovalsList lists the approvals the requester may decide.
	MethodApprovalsList = "io.mcptask/approvals/list"
	// MethodApprovalsDecide approves or denies one.
	MethodApprovalsDecide = "io.mcptask/approvals/decide"
)

// ApprovalsListParams are the params of MethodApprovalsList.
type ApprovalsListParams struct {
	mcp.ParamsBase
}

// PendingApproval is one approval MethodApprovalsList returns.
type PendingApproval struct {
	TaskID    string          `json:"taskId"`
	Tool      string          `json:"tool"`
	Requester string          `json:"requester"`
	CreatedAt string          `json:"createdAt"`
	ExpiresAt string          `json:"expiresAt"`
	Reason    string          `json:"reason,omitempty"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
}

// ApprovalsListResult is the result of MethodApprovalsList.
type ApprovalsListResult struct {
	mcp.ResultBase
	Approvals []PendingApproval `json:"approvals"`
}

// DecideParams are the params of MethodApprovalsDecide.
type DecideParams struct {
	mcp.ParamsBase
	TaskID  string `json:"taskId"`
	Approve bool   `json:"approve"`
	Reason  string `json:"reason,omitempty"`
}

// DecideResult is the result of MethodApprovalsDecide: the task now.
type DecideResult struct {
	mcp.ResultBase
	TaskID        string `json:"taskId"`
	Status        string `json:"status"`
	StatusMessage string `json:"statusMessage,omitempty"`
}
