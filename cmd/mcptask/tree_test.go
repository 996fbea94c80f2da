package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/mcptask/mcptask/client"
	"github.com/mcptask/mcptask/wire"
)

// fakeTree is a tree of tasks in memory, read by get.
type fakeTree struct {
	tasks map[string]*client.TaskStatus
	reads int
}

func (f *fakeTree) add(parent, id, step, tool, status, msg string) {
	if f.tasks == nil {
		f.tasks = map[string]*client.TaskStatus{}
	}
	f.tasks[id] = &client.TaskStatus{ID: id, Status: status, StatusMessage: msg, Parent: parent}
	if p := f.tasks[parent]; p != nil {
		p.Children = append(p.Children, wire.Child{TaskID: id, Step: step, Tool: tool, Status: status, StatusMessage: msg})
	}
}

func (f *fakeTree) get(_ context.Context, id string) (*client.TaskStatus, error) {
	f.reads++
	if st := f.tasks[id]; st != nil {
		return st, nil
	}
	return nil, fmt.Errorf("task %s: %w", id, client.ErrTaskNotFound)
}

func renderTree(t *taskTree) string {
	var b strings.Builder
	t.print(&b, "")
	return b.String()
}

// TestTreePrint draws a small tree: steps and tools, IDs, statuses and
// messages, a child that cannot be read, each child under its parent.
func TestTreePrint(t *testing.T) {
	f := &fakeTree{}
	f.add("", "top", "", "", "working", "")
	f.add("top", "a", "build", "make", "completed", "built\nfine")
	f.add("top", "b", "test", "sub", "working", "")
	f.add("b", "b1", "unit", "go-test", "working", "3/10")
	f.add("b", "b2", "lint", "lint", "input_required", "")
	f.add("top", "c", "deploy", "deploy", "working", "")
	f.tasks["top"].Children = append(f.tasks["top"].Children, wire.Child{TaskID: "gone", Step: "old", Tool: "x", Status: "completed"})
	tr := loadTree(context.Background(), f.get, f.tasks["top"], "pipeline")
	want := `├─ build (make) a: completed · built fine
├─ test (sub) b: working
│  ├─ unit (go-test) b1: working · 3/10
│  └─ lint b2: input_required
├─ deploy c: working
└─ old (x) gone: completed (could not read it: task gone: task not found)
`
	got := renderTree(tr)
	if !strings.HasPrefix(got, strings.SplitN(want, "(could not", 2)[0]) || !strings.Contains(got, "(could not read it: task gone: ") {
		t.Errorf("tree:\n%s\nwant:\n%s", got, want)
	}
	if tr.nodes != 7 || tr.cutText() != "" {
		t.Errorf("nodes %d, cut %q", tr.nodes, tr.cutText())
	}
	j := tr.json()
	if len(j) != 4 || len(j[1].Children) != 2 || j[1].Children[0].Child.TaskID != "b1" || j[3].Error == "" || j[0].Error != "" {
		t.Errorf("json: %+v", j)
	}
	if s := childrenSummary(f.tasks["top"].Children); s != "4 (2 completed, 2 working)" {
		t.Errorf("summary %q", s)
	}
}

// TestTreeBounds: a tree deeper than maxTreeDepth or larger than
// maxTreeNodes is cut, and says so; a loop is shown once.
func TestTreeBounds(t *testing.T) {
	t.Run("depth", func(t *testing.T) {
		f := &fakeTree{}
		f.add("", "t0", "", "", "working", "")
		for i := 1; i <= maxTreeDepth+3; i++ {
			f.add(fmt.Sprintf("t%d", i-1), fmt.Sprintf("t%d", i), "s", "tool", "working", "")
		}
		tr := loadTree(context.Background(), f.get, f.tasks["t0"], "")
		out := renderTree(tr)
		if tr.nodes != maxTreeDepth+1 || !tr.cutDepth || tr.cutSize || f.reads != maxTreeDepth {
			t.Errorf("nodes %d, reads %d, cut %v %v", tr.nodes, f.reads, tr.cutDepth, tr.cutSize)
		}
		deepest := fmt.Sprintf("t%d", maxTreeDepth)
		if !strings.Contains(out, strings.Repeat("   ", maxTreeDepth-1)+"└─ s (tool) "+deepest+": working (1 child not shown)\n") ||
			!strings.Contains(out, fmt.Sprintf("(tree cut: it shows at most %d levels deep;", maxTreeDepth)) {
			t.Errorf("tree:\n%s", out)
		}
	})
	t.Run("size", func(t *testing.T) {
		f := &fakeTree{}
		f.add("", "top", "", "", "working", "")
		for i := range wire.MaxChildrenShown {
			id := fmt.Sprintf("c%d", i)
			f.add("top", id, id, "tool", "completed", "")
			for k := range 3 {
				f.add(id, fmt.Sprintf("%s.%d", id, k), "k", "tool", "completed", "")
			}
		}
		tr := loadTree(context.Background(), f.get, f.tasks["top"], "")
		out := renderTree(tr)
		if tr.nodes != maxTreeNodes || !tr.cutSize || tr.cutDepth || f.reads != maxTreeNodes-1 {
			t.Errorf("nodes %d, reads %d, cut %v %v", tr.nodes, f.reads, tr.cutDepth, tr.cutSize)
		}
		// Breadth first: every child shown, then their children until
		// the bound.
		if !strings.Contains(out, "├─ c32 (tool) c32: completed\n│  ├─ k (tool) c32.0: completed\n") ||
			!strings.Contains(out, "├─ c33 (tool) c33: completed (3 children not shown)\n├─ c34 ") ||
			!strings.Contains(out, "└─ c99 (tool) c99: completed (3 children not shown)\n") ||
			!strings.Contains(out, fmt.Sprintf("\n(the server lists only the newest %d children)\n", wire.MaxChildrenShown)) ||
			!strings.Contains(out, fmt.Sprintf("(tree cut: it shows at most %d tasks;", maxTreeNodes)) {
			t.Errorf("tree:\n%s", out)
		}
	})
	t.Run("loop", func(t *testing.T) {
		f := &fakeTree{}
		f.add("", "a", "", "", "working", "")
		f.add("a", "b", "b", "tool", "working", "")
		f.tasks["b"].Children = []wire.Child{{TaskID: "a", Step: "a", Tool: "tool", Status: "working"}}
		tr := loadTree(context.Background(), f.get, f.tasks["a"], "")
		if tr.nodes != 2 || renderTree(tr) != "└─ b (tool) b: working\n" {
			t.Errorf("nodes %d:\n%s", tr.nodes, renderTree(tr))
		}
	})
	t.Run("cancelled", func(t *testing.T) {
		f := &fakeTree{}
		f.add("", "a", "", "", "working", "")
		f.add("a", "b", "b", "tool", "working", "")
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		tr := loadTree(ctx, f.get, f.tasks["a"], "")
		if f.reads != 0 || len(tr.top.children) != 1 || !errors.Is(tr.top.children[0].err, context.Canceled) {
			t.Errorf("reads %d, %+v", f.reads, tr.top.children)
		}
	})
}
