package wire

// MetaParent is the _meta key (io.mcptask/parentTaskId) under which
// tasks/get carries, on both wires, the ID of the task whose work started
// this one as a child (a nested task, see mcptask.Task.Spawn).
const MetaParent = MetaPrefix + "parentTaskId"

// MetaChildren is the _meta key (io.mcptask/children) under which
// tasks/get carries, on both wires, the children a task's work started,
// oldest first: a list of [Child]. Each is a task of its own, read by its
// ID with tasks/get by the same requester.
const MetaChildren = MetaPrefix + "children"

// MetaStepApproval is the _meta key (io.mcptask/stepApproval) of a
// child's stored call that holds it for an approval of its own (a
// workflow's approval step): {"approvers": [...], "expires": "1h",
// "reason": ...}. It is read only on children.
const MetaStepApproval = MetaPrefix + "stepApproval"

// MaxChildrenShown bounds the children tasks/get lists under
// MetaChildren (the newest are kept).
const MaxChildrenShown = 100

// Child is one child of a task, as tasks/get lists it (MetaChildren).
type Child struct {
	TaskID        string `json:"taskId"`
	Step          string `json:"step"`
	Tool          string `json:"tool"`
	Status        string `json:"status"`
	StatusMessage string `json:"statusMessage,omitempty"`
}
