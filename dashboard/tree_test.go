package dashboard_test

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mcptask/mcptask/dashboard"
	"github.com/mcptask/mcptask/engine"
	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/task"
)

// createTask stores a task of tool created at, a child of parent (with
// step, under root) when parent is not nil, completed when done.
func (e *env) createTask(tool string, at time.Time, parent *task.Task, step string, done bool) *task.Task {
	e.t.Helper()
	tk := &task.Task{
		ID: task.NewID(), Owner: task.UserOwner("acme", "alice"), Tool: tool, Status: task.Working,
		StatusMessage: tool + " <running>", CreatedAt: at.UTC(), LastUpdatedAt: at.UTC(), TTL: time.Hour, PollInterval: time.Second,
		Request: json.RawMessage(`{}`),
	}
	if parent != nil {
		tk.Parent, tk.Root = parent.ID, parent.Root
		if tk.Root == "" {
			tk.Root = parent.ID
		}
		tk.IdempotencyKey = task.StepKeyPrefix + string(parent.ID) + ":" + step
	}
	if done {
		if err := tk.Complete(json.RawMessage(`{"content":[]}`), at); err != nil {
			e.t.Fatal(err)
		}
		tk.StatusMessage = ""
	}
	if err := e.st.Create(context.Background(), tk, store.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	return tk
}

// TestTaskTree: a task page lists its children (step, tool, status,
// message, created; oldest first, each linked) and a child's page links
// its parent, with its tool, and the top of its tree; the list hides the
// children on request (its counts too) and lists the children of a task.
func TestTaskTree(t *testing.T) {
	e := newEnv(t, false, nil)
	t0 := time.Now().Add(-10 * time.Minute)
	root := e.createTask("workflow", t0, nil, "", false)
	root.Root = root.ID // the top of a tree names itself
	if _, err := e.st.Update(context.Background(), root.ID, func(tk *task.Task) error { tk.Root = root.ID; return nil }); err != nil {
		t.Fatal(err)
	}
	build := e.createTask("build", t0.Add(time.Minute), root, "build <b>api</b>", true)
	deploy := e.createTask("deploy", t0.Add(2*time.Minute), root, "deploy", false)
	test := e.createTask("test", t0.Add(3*time.Minute), build, "unit", true)
	other := e.createTask("lonely", t0.Add(4*time.Minute), nil, "", false)
	c := e.client()

	_, page := e.get(c, "/tasks/"+string(root.ID))
	for _, want := range []string{
		`id="children"`,
		`<a href="../tasks/` + string(build.ID) + `" title="task ` + string(build.ID) + `">build &lt;b&gt;api&lt;/b&gt;</a>`,
		`<a href="../tasks/` + string(deploy.ID) + `" title="task ` + string(deploy.ID) + `">deploy</a>`,
		`<td class="msg" title="deploy &lt;running&gt;">deploy &lt;running&gt;</td>`,
		`<span class="badge st-completed">completed</span>`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the root's page lacks %q", want)
		}
	}
	if i, j := strings.Index(page, `id="child-`+string(build.ID)), strings.Index(page, `id="child-`+string(deploy.ID)); i < 0 || j < i {
		t.Errorf("the children are not listed oldest first (build at %d, deploy at %d)", i, j)
	}
	for _, unwanted := range []string{`id="child-` + string(test.ID), `id="task-parent"`, `id="task-root"`, "<b>api</b>", `id="children-more"`} {
		if strings.Contains(page, unwanted) {
			t.Errorf("the root's page shows %q", unwanted)
		}
	}
	if t.Failed() {
		t.Logf("the page:\n%s", page)
	}

	_, page = e.get(c, "/tasks/"+string(build.ID))
	for _, want := range []string{
		`<dd id="task-parent"><a href="../tasks/` + string(root.ID) + `"><code>` + string(root.ID) + `</code></a> · workflow · this task is its step <strong id="task-step">build &lt;b&gt;api&lt;/b&gt;</strong></dd>`,
		`id="child-` + string(test.ID) + `"`, `>unit</a>`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the child's page lacks %q", want)
		}
	}
	if strings.Contains(page, `id="task-root"`) {
		t.Errorf("the child's page names the top of its tree apart from its parent, which it is")
	}
	_, page = e.get(c, "/tasks/"+string(test.ID))
	for _, want := range []string{
		`<dd id="task-parent"><a href="../tasks/` + string(build.ID) + `"><code>` + string(build.ID) + `</code></a> · build`,
		`<dd id="task-root"><a href="../tasks/` + string(root.ID) + `"><code>` + string(root.ID) + `</code></a> · workflow</dd>`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the grandchild's page lacks %q", want)
		}
	}
	if strings.Contains(page, `id="children"`) {
		t.Errorf("a task with no child shows a Children table")
	}
	// A parent gone from the store is named, unlinked.
	if err := e.st.Delete(context.Background(), root.ID); err != nil {
		t.Fatal(err)
	}
	if _, page = e.get(c, "/tasks/"+string(deploy.ID)); !strings.Contains(page, `<dd id="task-parent"><code>`+string(root.ID)+`</code> (no longer in the store)`) {
		t.Errorf("the page of a child whose parent is gone lacks it")
	}
	root = e.createTask("workflow", t0, nil, "", false) // a new top, for the list
	_ = root

	rowRe := regexp.MustCompile(`<tr id="row-([a-z0-9]+)"`)
	rows := func(body string) map[string]bool {
		m := map[string]bool{}
		for _, r := range rowRe.FindAllStringSubmatch(body, -1) {
			m[r[1]] = true
		}
		return m
	}
	_, body := e.get(c, "/")
	if got := rows(body); len(got) != 5 || !got[string(test.ID)] || !got[string(other.ID)] {
		t.Errorf("the list shows %v; want the 5 tasks", got)
	}
	if !strings.Contains(body, `<a class="badge child" href="tasks/`+string(build.ID)+`" title="a child task (step unit): open its parent, `+string(build.ID)+`">child</a>`) {
		t.Errorf("the list does not mark the children")
	}
	if strings.Contains(body, `id="f-hide-children" checked`) {
		t.Errorf("the list hides children by default")
	}
	_, body = e.get(c, "/?children=hide")
	if got := rows(body); len(got) != 2 || !got[string(root.ID)] || !got[string(other.ID)] {
		t.Errorf("children=hide shows %v; want %s and %s", got, root.ID, other.ID)
	}
	for _, want := range []string{
		`id="f-hide-children" checked`,
		`<li class="total">All <strong>2</strong></li>`,
		`data-status="working">working <strong>2</strong>`,
		`href="?children=hide&amp;status=completed"`, // the counts' links keep the filter
		`<input type="hidden" name="back" value="children=hide">`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("children=hide: the list lacks %q", want)
		}
	}
	if !strings.Contains(body, `data-status="completed">completed <strong>0</strong>`) {
		t.Errorf("children=hide counts the completed children")
	}
	_, body = e.get(c, "/?status=completed&children=hide")
	if got := rows(body); len(got) != 0 {
		t.Errorf("completed, children hidden: %v", got)
	}

	_, body = e.get(c, "/?parent="+string(build.ID))
	if got := rows(body); len(got) != 1 || !got[string(test.ID)] {
		t.Errorf("parent=build shows %v; want %s", got, test.ID)
	}
	for _, want := range []string{
		`<p class="scope" id="scope">The children of task <a href="./tasks/` + string(build.ID) + `"><code>` + string(build.ID) + `</code></a> · <a href="./">every task</a></p>`,
		`<input type="hidden" name="parent" value="` + string(build.ID) + `">`,
		`<li class="total">All <strong>1</strong></li>`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("parent=build: the list lacks %q", want)
		}
	}
}

// TestTaskManyChildren: a task with more children than a page lists
// shows its latest ones, oldest first, says how many it has, and links
// the list of them all.
func TestTaskManyChildren(t *testing.T) {
	e := newEnv(t, false, nil)
	t0 := time.Now().Add(-time.Hour)
	parent := e.createTask("fan-out", t0, nil, "", false)
	var kids []*task.Task
	for i := range dashboard.ChildrenShown + 1 {
		kids = append(kids, e.createTask("shard", t0.Add(time.Duration(i+1)*time.Second), parent, fmt.Sprintf("shard-%03d", i), false))
	}
	c := e.client()
	_, page := e.get(c, "/tasks/"+string(parent.ID))
	want := fmt.Sprintf(`This task has %d children: these are the latest %d, oldest first. <a href="../?parent=%s">`, len(kids), dashboard.ChildrenShown, parent.ID)
	if !strings.Contains(page, want) {
		t.Errorf("the page lacks %q", want)
	}
	shown := regexp.MustCompile(`<tr id="child-([a-z0-9]+)"`).FindAllStringSubmatch(page, -1)
	if len(shown) != dashboard.ChildrenShown || shown[0][1] != string(kids[1].ID) || shown[len(shown)-1][1] != string(kids[len(kids)-1].ID) {
		t.Errorf("the page lists %d children from %v; want the latest %d, oldest (%s) first", len(shown), shown[0][1], dashboard.ChildrenShown, kids[1].ID)
	}
	_, body := e.get(c, "/?parent="+string(parent.ID))
	if !strings.Contains(body, fmt.Sprintf(`id="range" class="range">1–50 of %d<`, len(kids))) {
		t.Errorf("the list of the children does not count them all")
	}
}

// TestLiveTaskChildren: a task page's stream follows its children: a
// child's change is sent at once (not at the next recheck).
func TestLiveTaskChildren(t *testing.T) {
	e := newEnv(t, false, func(o *dashboard.Options) { o.RecheckInterval = time.Hour })
	parent := e.start(task.UserOwner("acme", "alice"), "workflow", "")
	child := e.startSpec(engine.StartSpec{Owner: parent.Owner, Tool: "build", Request: json.RawMessage(`{}`),
		Parent: parent.ID, Root: parent.ID, IdempotencyKey: task.StepKeyPrefix + string(parent.ID) + ":compile"}, "compiling")
	row := `id="child-` + string(child.ID) + `" data-id="` + string(child.ID) + `" data-status="`
	c := e.client()
	ev := e.readEvents(c, "/tasks/"+string(parent.ID)+"/live", func(name, data string) bool {
		return name == "task" && strings.Contains(data, row+`completed"`)
	}, func() { e.finish(child.ID, "built") })
	if !strings.Contains(ev, row+`working"`) || !strings.Contains(ev, ">compile</a>") {
		t.Errorf("the stream did not start with the working child:\n%s", ev)
	}
}
