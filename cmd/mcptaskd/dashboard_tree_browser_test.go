package main

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/mcptask/mcptask/internal/testkit/wiretest"
)

// TestDashboardTreeBrowser drives the dashboard of an mcptaskd running a
// workflow (two command steps, the second waiting for a file) in
// headless Chromium: the workflow's page lists its steps as children and
// follows the second one's end live; a child's page links its parent and
// names its step; the task list hides the children when asked.
func TestDashboardTreeBrowser(t *testing.T) {
	dir := t.TempDir()
	release := filepath.Join(dir, "release")
	config := filepath.Join(dir, "mcptaskd.yaml")
	if err := os.WriteFile(config, []byte(`demo: false
commands:
  quick: {argv: [/bin/sh, -c, "echo quick"], task: required}
  hold: {argv: [/bin/sh, -c, "while [ ! -f `+release+` ]; do sleep 0.02; done"], task: required}
workflows:
  tree:
    steps:
      - {name: first, tool: quick}
      - {name: second, tool: hold, needs: [first]}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	tokens := filepath.Join(dir, "admins.json")
	if err := os.WriteFile(tokens, []byte(`[{"token": "`+dashboardToken+`", "operator": "alice"}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	base := serveApp(t, nil, "-db", filepath.Join(dir, "tasks.db"), "-config", config, "-admin-token-file", tokens)
	c := &wiretest.Client{URL: base + "/mcp", Tasks: true, HTTP: &http.Client{Timeout: 30 * time.Second}}
	id := startTask(t, c, "tree", nil)
	tk := waitTask(t, c, id, browserWait, "the second step running", func(tk *wiretest.Task) bool {
		return childrenOf(t, tk)["second"].Status == "working"
	})
	first, second := childrenOf(t, tk)["first"].TaskID, childrenOf(t, tk)["second"].TaskID

	b := newBrowser(t)
	b.signIn(base)
	b.navigate(base + "/dashboard/tasks/" + id)
	child := func(id string) string { return `document.getElementById("child-` + id + `")` }
	b.waitJS("the workflow's children", child(first)+` && `+child(second)+` && `+child(first)+`.dataset.status === "completed" && `+child(second)+`.dataset.status === "working"`)
	if got := js[string](b, child(first)+`.querySelector("td.step").textContent`); got != "first" {
		t.Errorf("the first child's step reads %q", got)
	}
	b.screenshot("dashboard-tree.png")
	if err := os.WriteFile(release, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	b.waitJS("the second step's end, live", child(second)+` && `+child(second)+`.dataset.status === "completed"`)

	b.click(`#child-` + first + ` td.step a`)
	b.waitJS("the child's page", `location.pathname === "/dashboard/tasks/`+first+`" && document.querySelector("#task-parent")`)
	if got := js[string](b, `new URL(document.querySelector("#task-parent a").href).pathname`); got != "/dashboard/tasks/"+id {
		t.Errorf("the parent's link is %q", got)
	}
	if got := b.text("#task-step"); got != "first" {
		t.Errorf("the child's step reads %q", got)
	}

	b.navigate(base + "/dashboard/")
	b.waitJS("the list with the children", `document.getElementById("row-`+id+`") && document.getElementById("row-`+first+`")`)
	b.click("#f-hide-children")
	b.click("#apply")
	b.waitJS("the list without the children", `location.search.includes("children=hide") && document.getElementById("row-`+id+`") && !document.getElementById("row-`+first+`") && !document.getElementById("row-`+second+`")`)
	b.noProblems()
}
