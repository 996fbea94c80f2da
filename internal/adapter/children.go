package adapter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"strings"
	"sync"
	"unicode"

	"github.com/mcptask/mcptask/engine"
	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/task"
	"github.com/mcptask/mcptask/wire"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The defaults of the tree limits (Limits.MaxChildDepth, MaxChildren,
// MaxTreeTasks; mcptask.Limits documents them).
const (
	defaultChildDepth = 8
	defaultChildren   = 100
	defaultTreeTasks  = 1000
)

// MaxStep bounds the length of a child's step name.
const MaxStep = 128

// SpawnError is why a child task was not started.
type SpawnError struct {
	// Step and Tool name the child.
	Step, Tool string
	// Limit names the tree limit it went past ("depth", "children",
	// "tree"), "" for another reason.
	Limit string
	// Reason says why, for a person.
	Reason string
}

func (e *SpawnError) Error() string {
	return fmt.Sprintf("mcptask: step %q (tool %s) not started: %s", e.Step, e.Tool, e.Reason)
}

// spawnLocks serialize the spawns of one parent in this process (a
// parent's work runs on one engine at a time), so that its counted
// children never overshoot the limit: one lock of 64 per parent, by a
// hash of its ID.
var spawnLocks [64]sync.Mutex

func spawnLock(id task.ID) *sync.Mutex {
	h := fnv.New32a()
	h.Write([]byte(id))
	return &spawnLocks[h.Sum32()%uint32(len(spawnLocks))]
}

// Spawn is the engine's Hooks.Spawn: it starts the child of parent that
// spec describes, as a task of spec.Tool for parent's owner made through
// the same creation as every task (the tool's task support, its argument
// schema, the fleet's switches, approval gates, the owner's cap on
// unfinished tasks), linked to parent, under the tree limits; or it
// returns the child parent started for spec.Step before (a re-run of
// the parent's work after a crash finds its children), whatever its
// state.
func (c *Core) Spawn(ctx context.Context, parent *task.Task, spec engine.SpawnSpec) (*task.Task, error) {
	fail := func(limit, reason string) error {
		return &SpawnError{Step: spec.Step, Tool: spec.Tool, Limit: limit, Reason: reason}
	}
	if spec.Step == "" || len(spec.Step) > MaxStep || strings.IndexFunc(spec.Step, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0 {
		return nil, fail("", fmt.Sprintf("a step name has 1 to %d printable characters", MaxStep))
	}
	p := c.Tool(spec.Tool)
	if p.Support == Forbidden {
		return nil, fail("", fmt.Sprintf("there is no tool %q that runs as a task on this server", spec.Tool))
	}
	args := spec.Arguments
	if len(args) == 0 {
		args = json.RawMessage(`{}`)
	}
	params := &mcp.CallToolParamsRaw{Meta: spec.Meta, Name: spec.Tool, Arguments: args}
	raw, err := json.Marshal(params)
	if err != nil {
		return nil, fail("", "cannot encode the call: "+err.Error())
	}
	key := task.StepKeyPrefix + string(parent.ID) + ":" + spec.Step
	mu := spawnLock(parent.ID)
	mu.Lock()
	defer mu.Unlock()
	if t, err := c.eng.Store().GetByKey(ctx, parent.Owner, key); err == nil {
		if t.Parent != parent.ID || t.Tool != spec.Tool || task.CallDigest(t.Tool, t.Request) != task.CallDigest(spec.Tool, raw) {
			return nil, fail("", fmt.Sprintf("the step was started before with another call (tool %s, task %s): a step's call must not change between runs", t.Tool, t.ID))
		}
		return t, nil
	} else if !errors.Is(err, store.ErrNotFound) {
		return nil, err
	}
	if res := c.RejectedArguments(params, p); res != nil {
		return nil, fail("", "its arguments do not match the tool's input schema: "+resultText(res))
	}
	if err := c.treeRoom(ctx, parent); err != nil {
		var se *SpawnError
		if errors.As(err, &se) {
			se.Step, se.Tool = spec.Step, spec.Tool
		}
		return nil, err
	}
	k := creation{via: viaChild, owner: parent.Owner, tool: spec.Tool, p: p, request: raw, version: parent.Wire, key: key,
		parent: parent, gate: spec.Gate, message: spec.GateMessage,
		work: c.traced(spec.Meta, spec.Tool, firstAttempt, c.storedCallWork(raw))}
	return c.create(ctx, k)
}

// treeRoom reports, as a *SpawnError, a child of parent that would go
// past the tree limits: the depth, the children of parent, the tasks of
// its tree.
func (c *Core) treeRoom(ctx context.Context, parent *task.Task) error {
	l := c.limits.cfg
	maxDepth, maxChildren, maxTree := orDefault(l.MaxChildDepth, defaultChildDepth), orDefault(l.MaxChildren, defaultChildren), orDefault(l.MaxTreeTasks, defaultTreeTasks)
	depth := 0
	for at := parent; at.Parent != ""; depth++ {
		if depth >= maxDepth {
			break
		}
		up, err := c.eng.Store().Get(ctx, at.Parent)
		if errors.Is(err, store.ErrNotFound) {
			break // an ancestor deleted: count from here
		}
		if err != nil {
			return err
		}
		at = up
	}
	if depth >= maxDepth {
		return &SpawnError{Limit: "depth", Reason: fmt.Sprintf("task %s is at depth %d, the deepest a task that starts children may be is %d", parent.ID, depth, maxDepth-1)}
	}
	count := func(q store.BrowseQuery) (int64, error) {
		n, err := c.eng.Store().CountByStatus(ctx, q)
		if err != nil {
			return 0, err
		}
		var sum int64
		for _, v := range n.ByStatus {
			sum += v
		}
		return sum, nil
	}
	n, err := count(store.BrowseQuery{Parent: parent.ID})
	if err != nil {
		return err
	}
	if n >= int64(maxChildren) {
		return &SpawnError{Limit: "children", Reason: fmt.Sprintf("task %s has started %d children, at most %d", parent.ID, n, maxChildren)}
	}
	root := parent.Root
	if root == "" {
		root = parent.ID
	}
	if n, err = count(store.BrowseQuery{Root: root}); err != nil {
		return err
	}
	if n+1 >= int64(maxTree) {
		return &SpawnError{Limit: "tree", Reason: fmt.Sprintf("the tree of task %s holds %d tasks, at most %d", root, n+1, maxTree)}
	}
	return nil
}

func orDefault(v, d int) int {
	if v <= 0 {
		return d
	}
	return v
}

// resultText is the text of a tool result's content.
func resultText(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, t.Text)
		}
	}
	return strings.Join(parts, " ")
}

// WithTree returns meta with t's place in a tree: its parent's ID
// (wire.MetaParent) and its children (wire.MetaChildren, oldest first,
// the newest wire.MaxChildrenShown), read from the store only for a
// task in a tree (one with a parent, or the top of a tree, whose Root is
// its own ID). meta itself when t is in no tree or its children cannot
// be read (the task's own answer must not fail for them; logged).
func (c *Core) WithTree(ctx context.Context, t *task.Task, meta mcp.Meta) mcp.Meta {
	if t.Parent == "" && t.Root != t.ID {
		return meta
	}
	if meta == nil {
		meta = mcp.Meta{}
	}
	if t.Parent != "" {
		meta[wire.MetaParent] = string(t.Parent)
	}
	children, _, err := c.eng.Store().Browse(ctx, store.BrowseQuery{Parent: t.ID, Owner: t.Owner, Limit: wire.MaxChildrenShown})
	if err != nil {
		if !abandoned(ctx, err) {
			c.Log().Warn("reading the task's children", "task", t.ID, "err", err)
		}
		return meta
	}
	if len(children) == 0 {
		return meta
	}
	list := make([]wire.Child, len(children))
	for i, ch := range children {
		list[len(children)-1-i] = wire.Child{TaskID: string(ch.ID), Step: task.StepOf(ch), Tool: ch.Tool, Status: string(ch.Status), StatusMessage: ch.StatusMessage}
	}
	meta[wire.MetaChildren] = list
	return meta
}
