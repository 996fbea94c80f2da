package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/mcptask/mcptask/client"
	"github.com/mcptask/mcptask/wire"
	"github.com/mcptask/mcptask/wire/ext2026"
)

// Bounds of a task tree read by 'mcptask status --tree' (and followed by a
// wait): how deep below the task, and how many tasks in all, the task
// itself included.
const (
	maxTreeDepth = 8
	maxTreeNodes = 200
)

// getTask reads a task by its ID (the client's Get).
type getTask func(ctx context.Context, id string) (*client.TaskStatus, error)

// treeNode is one task of a tree.
type treeNode struct {
	// Child is the task as its parent lists it, with the status and
	// message read from the task itself when it could be read. For the
	// top of the tree, only TaskID, Tool, Status and StatusMessage.
	Child wire.Child
	depth int
	// err is why the task could not be read: it is shown as its parent
	// lists it, without its own children.
	err      error
	children []*treeNode
	// hidden counts the children not shown (the depth or size bound).
	hidden int
	// listCut: the server listed only the newest wire.MaxChildrenShown
	// children; older ones may exist.
	listCut bool
}

// taskTree is a task and the tasks its work started, recursively, as far
// as the bounds allow.
type taskTree struct {
	top   *treeNode
	nodes int // tasks shown, the top included
	// cutDepth and cutSize say which bound left children out.
	cutDepth, cutSize bool
}

// loadTree reads the tree below top (a task read with get), breadth
// first: each child is read by its ID with get for its fresh status and
// its own children, down to maxTreeDepth levels below top and up to
// maxTreeNodes tasks in all.
func loadTree(ctx context.Context, get getTask, top *client.TaskStatus, tool string) *taskTree {
	t := &taskTree{top: &treeNode{Child: wire.Child{TaskID: top.ID, Tool: tool, Status: top.Status, StatusMessage: top.StatusMessage}}, nodes: 1}
	seen := map[string]bool{top.ID: true}
	type item struct {
		n  *treeNode
		st *client.TaskStatus
	}
	queue := []item{{t.top, top}}
	for len(queue) > 0 {
		it := queue[0]
		queue = queue[1:]
		n, kids := it.n, it.st.Children
		if len(kids) == 0 {
			continue
		}
		n.listCut = len(kids) >= wire.MaxChildrenShown
		if n.depth >= maxTreeDepth {
			n.hidden, t.cutDepth = len(kids), true
			continue
		}
		for i, k := range kids {
			if seen[k.TaskID] {
				continue // a loop: shown once
			}
			if t.nodes >= maxTreeNodes {
				n.hidden, t.cutSize = len(kids)-i, true
				break
			}
			seen[k.TaskID] = true
			c := &treeNode{Child: k, depth: n.depth + 1}
			n.children = append(n.children, c)
			t.nodes++
			if ctx.Err() != nil {
				c.err = ctx.Err()
				continue
			}
			st, err := get(ctx, k.TaskID)
			if err != nil {
				c.err = err
				continue
			}
			c.Child.Status, c.Child.StatusMessage = st.Status, st.StatusMessage
			queue = append(queue, item{c, st})
		}
	}
	return t
}

// walk calls f for each task below the top, depth first, oldest child
// first, with the prefix that draws its place in the tree.
func (t *taskTree) walk(f func(n *treeNode, prefix string)) {
	var rec func(n *treeNode, indent string)
	rec = func(n *treeNode, indent string) {
		for i, c := range n.children {
			branch, next := "├─ ", "│  "
			if i == len(n.children)-1 {
				branch, next = "└─ ", "   "
			}
			f(c, indent+branch)
			rec(c, indent+next)
		}
	}
	rec(t.top, "")
}

// nodeText is how a tree shows a task: its step and tool, its ID, its
// status and message.
func nodeText(c wire.Child) string {
	var b strings.Builder
	switch {
	case c.Step != "" && c.Step != c.Tool:
		fmt.Fprintf(&b, "%s (%s) ", oneLine(c.Step), orDash(c.Tool))
	case c.Tool != "":
		b.WriteString(c.Tool + " ")
	}
	b.WriteString(c.TaskID + ": " + c.Status)
	if c.StatusMessage != "" {
		b.WriteString(" · " + oneLine(c.StatusMessage))
	}
	return b.String()
}

// hiddenText says what a tree leaves out under a task, "" for nothing.
func hiddenText(n *treeNode) string {
	var parts []string
	if n.hidden > 0 {
		more := ""
		if len(n.children) > 0 {
			more = "more "
		}
		parts = append(parts, fmt.Sprintf("%d %s%s not shown", n.hidden, more, plural(n.hidden, "child", "children")))
	}
	if n.listCut {
		parts = append(parts, fmt.Sprintf("the server lists only the newest %d children", wire.MaxChildrenShown))
	}
	return strings.Join(parts, "; ")
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// print prints the tree below the top, a line per task after indent (a
// task whose children are not all shown says so), then what the tree's
// bounds cut.
func (t *taskTree) print(w io.Writer, indent string) {
	t.walk(func(n *treeNode, prefix string) {
		line := nodeText(n.Child)
		if n.err != nil {
			line += fmt.Sprintf(" (could not read it: %v)", n.err)
		}
		if h := hiddenText(n); h != "" {
			line += " (" + h + ")"
		}
		fmt.Fprintf(w, "%s%s%s\n", indent, prefix, line)
	})
	if h := hiddenText(t.top); h != "" {
		fmt.Fprintf(w, "%s(%s)\n", indent, h)
	}
	if s := t.cutText(); s != "" {
		fmt.Fprintf(w, "%s(%s)\n", indent, s)
	}
}

// cutText says which bound cut the tree, "" when none did.
func (t *taskTree) cutText() string {
	var why []string
	if t.cutDepth {
		why = append(why, fmt.Sprintf("%d levels deep", maxTreeDepth))
	}
	if t.cutSize {
		why = append(why, fmt.Sprintf("%d tasks", maxTreeNodes))
	}
	if len(why) == 0 {
		return ""
	}
	return "tree cut: it shows at most " + strings.Join(why, " and ") + "; 'mcptask status --tree CHILD_ID' shows a child's own tree"
}

// childrenSummary counts a task's children by status, e.g. "3 (2
// completed, 1 working)".
func childrenSummary(kids []wire.Child) string {
	var order []string
	count := map[string]int{}
	for _, k := range kids {
		if count[k.Status] == 0 {
			order = append(order, k.Status)
		}
		count[k.Status]++
	}
	var parts []string
	for _, s := range order {
		parts = append(parts, fmt.Sprintf("%d %s", count[s], s))
	}
	n := fmt.Sprint(len(kids))
	if len(kids) >= wire.MaxChildrenShown {
		n += "+"
	}
	return n + " (" + strings.Join(parts, ", ") + ")"
}

// jsonTreeNode is a task of a tree as 'mcptask status --tree --json'
// prints it.
type jsonTreeNode struct {
	wire.Child
	Error    string         `json:"error,omitempty"` // why it could not be read
	Children []jsonTreeNode `json:"children,omitempty"`
	// Hidden counts the children not shown (the tree's bounds).
	Hidden int `json:"hiddenChildren,omitempty"`
}

// json returns the tree below the top, for --json.
func (t *taskTree) json() []jsonTreeNode {
	var rec func(n *treeNode) []jsonTreeNode
	rec = func(n *treeNode) []jsonTreeNode {
		var out []jsonTreeNode
		for _, c := range n.children {
			j := jsonTreeNode{Child: c.Child, Children: rec(c), Hidden: c.hidden}
			if c.err != nil {
				j.Error = c.err.Error()
			}
			out = append(out, j)
		}
		return out
	}
	return rec(t.top)
}

// treeFollower shows, on the status display of a wait, the tree of the
// task waited for: a line each time a task of the tree appears or changes
// its status or message, indented by its depth. Once the task shows
// children it reads the tree at the server's poll interval (within
// minTreePoll and maxTreePoll), and once more when the wait ends.
//
// The statuses the wait sees carry the task's children when the wait
// polls (tasks/get) and in 2026-07-28's task notifications, not in
// 2025-11-25's: unless --no-push, the follower also reads the task
// itself at once and, on 2025-11-25, every treeDiscover until it shows
// children.
type treeFollower struct {
	a        *app
	c        *client.Client
	id       string
	discover bool // read the task until it shows children
	again    bool // ... every treeDiscover (the wire's notifications carry no children)
	kick     chan *client.TaskStatus
	ctx      context.Context // of the follower's reads, done when it stops
	stop     context.CancelFunc
	done     chan struct{}
	shown    map[string]string // task ID → the line printed last
	cut      bool              // the cut was said
	last     *client.TaskStatus
}

// Intervals of a treeFollower.
const (
	minTreePoll  = 100 * time.Millisecond
	maxTreePoll  = 2 * time.Second
	treeDiscover = 2 * time.Second
)

// followTree starts following the tree of task id during a wait; nil
// when the display shows nothing (--json without a terminal). Call
// update with each status the wait sees, and end when it is over.
func (a *app) followTree(c *client.Client, id string) *treeFollower {
	if a.view == nil || a.view.mode == viewQuiet {
		return nil
	}
	// 2026-07-28's task notifications carry the task's children; those
	// of 2025-11-25 carry no _meta, so only reading the task finds them.
	f := &treeFollower{a: a, c: c, id: id, discover: !a.cmd.noPush, again: c.Wire() != ext2026.Version, kick: make(chan *client.TaskStatus, 1),
		done: make(chan struct{}), shown: map[string]string{}}
	f.ctx, f.stop = context.WithCancel(context.Background())
	go f.run()
	return f
}

// update hands the follower a status of the task the wait saw.
func (f *treeFollower) update(st *client.TaskStatus) {
	if f == nil || len(st.Children) == 0 {
		return
	}
	select {
	case <-f.kick: // replaced by the newer
	default:
	}
	f.kick <- st
}

func (f *treeFollower) run() {
	defer close(f.done)
	var next <-chan time.Time
	if f.discover {
		next = time.After(0)
	}
	for {
		select {
		case <-f.ctx.Done():
			return
		case st := <-f.kick:
			f.refresh(f.ctx, st)
		case <-next:
			if st := f.get(f.ctx); st != nil && len(st.Children) > 0 {
				f.refresh(f.ctx, st)
			}
		}
		switch {
		case f.last != nil:
			next = time.After(min(max(f.last.PollInterval, minTreePoll), maxTreePoll))
		case f.discover && f.again:
			next = time.After(treeDiscover)
		default:
			next = nil // the notifications will show children
		}
	}
}

// get reads the task, nil when that fails or ctx ends meanwhile.
func (f *treeFollower) get(ctx context.Context) *client.TaskStatus {
	ctx, cancel := requestContext(ctx)
	defer cancel()
	st, err := f.c.Get(ctx, f.id)
	if err != nil {
		return nil
	}
	return st
}

// refresh reads the tree below st (a status of the task with children)
// and prints what changed in it, unless ctx ends meanwhile.
func (f *treeFollower) refresh(ctx context.Context, st *client.TaskStatus) {
	f.last = st
	t := loadTree(ctx, getOf(f.c), st, "")
	if ctx.Err() != nil {
		return
	}
	t.walk(func(n *treeNode, _ string) {
		if n.err != nil {
			return
		}
		line := strings.Repeat("  ", n.depth-1) + "└ " + nodeText(n.Child)
		if f.shown[n.Child.TaskID] == line {
			return
		}
		f.shown[n.Child.TaskID] = line
		f.a.view.Notef("mcptask: %s", line)
	})
	if s := t.cutText(); s != "" && !f.cut {
		f.cut = true
		f.a.view.Notef("mcptask: (%s)", s)
	}
}

// end stops following and, when the task showed children (or may have,
// unseen), reads its tree once more so that their last states are shown.
// ctx is the wait's: once done, nothing more is read.
func (f *treeFollower) end(ctx context.Context) {
	if f == nil {
		return
	}
	f.stop()
	<-f.done
	select {
	case st := <-f.kick:
		f.last = st
	default:
	}
	if (f.last == nil && !f.discover) || ctx.Err() != nil {
		return
	}
	if st := f.get(ctx); st != nil && len(st.Children) > 0 {
		f.refresh(ctx, st)
	}
}
