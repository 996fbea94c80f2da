package mcptask

import (
	"testing"

	"github.com/mcptask/mcptask/task"
)

// TestApprovalAdmits: who an approval admits, and who may not approve
// their own call.
func TestApprovalAdmits(t *testing.T) {
	a := &Approval{Approvers: []string{"bob", "acme/carol", "scope:release", "*"}}
	mcpOnly := &Approval{Approvers: []string{"bob", "acme/carol", "scope:release"}}
	call := &task.Task{Tool: "deploy", Owner: task.UserOwner("acme", "alice")}
	for _, c := range []struct {
		name string
		a    *Approval
		ap   approver
		ok   bool
	}{
		{"operator by name", mcpOnly, approver{name: "bob", operator: true}, true},
		{"operator by *", a, approver{name: "zed", operator: true}, true},
		{"requester not admitted by *", a, approver{name: "zed", tenant: "acme"}, false},
		{"requester by tenant/principal", mcpOnly, approver{name: "carol", tenant: "acme"}, true},
		{"same principal, other tenant", mcpOnly, approver{name: "carol", tenant: "evil"}, false},
		{"bare name needs no tenant", mcpOnly, approver{name: "bob", tenant: "acme"}, false},
		{"scope", mcpOnly, approver{name: "zed", tenant: "acme", scopes: []string{"read", "release"}}, true},
		{"other scope", mcpOnly, approver{name: "zed", tenant: "acme", scopes: []string{"read"}}, false},
		{"own call", &Approval{Approvers: []string{"scope:release"}}, approver{name: "alice", tenant: "acme", scopes: []string{"release"}}, false},
		{"own call, operator", &Approval{Approvers: []string{"*"}}, approver{name: "acme/alice", operator: true}, false},
		{"own call allowed", &Approval{Approvers: []string{"scope:release"}, SelfApproval: true}, approver{name: "alice", tenant: "acme", scopes: []string{"release"}}, true},
	} {
		if err := c.a.mayApprove(c.ap, call); (err == nil) != c.ok {
			t.Errorf("%s: %v; want ok=%v", c.name, err, c.ok)
		}
	}
}
