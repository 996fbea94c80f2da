// Package workflow is a tool source: workflows, tools made of steps that
// call other tools of the same server (Go tools, an upstream's, commands,
// HTTP jobs), declared in mcptaskd's configuration (workflows:, see
// docs/workflows.md). Each step runs as a child task of the workflow's
// task ([mcptask.Task.Spawn]), in the order its needs give (sequences,
// fan-out, fan-in), its arguments filled from the workflow's arguments
// and earlier steps' results, skipped when its condition does not hold,
// retried, bounded in time, held for an approval if it declares one. The
// workflow's task is an ordinary task on both wires: its status message
// names the steps that run, its result collects theirs. It survives
// crashes: its work runs again after a restart or a takeover and finds
// the steps it started, so that a finished step never runs again, a
// running one is waited for (it follows its own tool's recovery), and a
// pending one starts once.
package workflow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/mcptask/mcptask"
	"github.com/mcptask/mcptask/wire"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Workflow is one workflow tool.
type Workflow struct {
	// Name is the tool's name; Description its description.
	Name, Description string
	// InputSchema is the JSON Schema of its arguments (nil: any object).
	InputSchema map[string]any
	// Steps are its steps, in the order they are declared (which breaks
	// ties between steps ready at once).
	Steps []Step
	// MaxParallel bounds the steps running at once (0: no bound).
	MaxParallel int
}

// Step is one step of a workflow: a call of a tool, as a child task.
type Step struct {
	// Name names the step (letters, digits, '_' and '-'), unique in its
	// workflow: its child's step name, and how other steps refer to it.
	Name string
	// Tool is the tool the step calls, a task tool of the same server.
	Tool string
	// Arguments are the call's arguments, a JSON object whose strings may
	// hold references (${args/...}, ${steps.NAME/...}, see template.go).
	Arguments map[string]any
	// Needs are the steps that must have ended before this one starts.
	Needs []string
	// When, if set, is a condition (see condition): false skips the step.
	When string
	// Retries is how many times a failed step is started again.
	Retries int
	// Timeout, if positive, bounds each attempt, from its creation
	// (across restarts): an attempt past it is cancelled and fails.
	Timeout time.Duration
	// ContinueOnError lets the workflow go on when the step fails (its
	// dependents see its outcome); otherwise its failure ends the
	// workflow, cancelling the steps that run.
	ContinueOnError bool
	// Approval, if set, holds the step's call until an approver approves
	// it (see mcptask.Approval).
	Approval *mcptask.Approval
}

// stepName is what a step may be called.
var stepName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// MaxSteps bounds the steps of a workflow.
const MaxSteps = 100

// Check reports what is wrong with w: its steps' names, needs (known, no
// cycle), references (to steps it needs, directly or not), conditions.
// It does not check that the tools exist: an upstream's tools are known
// only once it answers.
func Check(w Workflow) error {
	var errs []error
	bad := func(step, format string, args ...any) {
		prefix := "workflows." + w.Name
		if step != "" {
			prefix += ".steps." + step
		}
		errs = append(errs, fmt.Errorf("%s: %s", prefix, fmt.Sprintf(format, args...)))
	}
	if len(w.Steps) == 0 {
		bad("", "a workflow needs at least one step")
	}
	if len(w.Steps) > MaxSteps {
		bad("", "%d steps, at most %d", len(w.Steps), MaxSteps)
	}
	if w.MaxParallel < 0 {
		bad("", "maxParallel must not be negative")
	}
	byName := map[string]*Step{}
	for i := range w.Steps {
		s := &w.Steps[i]
		if !stepName.MatchString(s.Name) {
			bad(s.Name, "%q is not a step name: 1 to 64 letters, digits, '_' or '-'", s.Name)
			continue
		}
		if byName[s.Name] != nil {
			bad(s.Name, "two steps are named %q", s.Name)
		}
		byName[s.Name] = s
	}
	for i := range w.Steps {
		s := &w.Steps[i]
		if s.Tool == "" {
			bad(s.Name, "tool: name the tool the step calls")
		}
		if s.Tool == w.Name {
			bad(s.Name, "tool: a workflow does not call itself")
		}
		if s.Retries < 0 || s.Retries > 10 {
			bad(s.Name, "retries: %d, want 0 to 10", s.Retries)
		}
		if s.Timeout < 0 {
			bad(s.Name, "timeout must not be negative")
		}
		if s.Approval != nil && len(s.Approval.Approvers) == 0 {
			bad(s.Name, "approval: name at least one approver")
		}
		for _, n := range s.Needs {
			if byName[n] == nil {
				bad(s.Name, "needs: there is no step %q", n)
			}
			if n == s.Name {
				bad(s.Name, "needs: a step does not need itself")
			}
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	if cycle := findCycle(w.Steps, byName); cycle != nil {
		bad(cycle[0], "needs: a cycle: %s", strings.Join(cycle, " → "))
		return errors.Join(errs...)
	}
	for i := range w.Steps {
		s := &w.Steps[i]
		rs, err := refs(map[string]any(s.Arguments))
		if err != nil {
			bad(s.Name, "arguments: %v", err)
		}
		c, err := parseCondition(s.When)
		if err != nil {
			bad(s.Name, "when: %v", err)
		}
		if c != nil {
			for _, side := range []string{c.left, c.right} {
				more, _ := refs(side)
				rs = append(rs, more...)
			}
		}
		for _, r := range rs {
			if r.step == "" {
				continue
			}
			if byName[r.step] == nil {
				bad(s.Name, "${steps.%s...}: there is no step %q", r.step, r.step)
			} else if !needsOf(s, byName)[r.step] {
				bad(s.Name, "${steps.%s...}: the step reads %s without needing it (add it to needs)", r.step, r.step)
			}
		}
	}
	return errors.Join(errs...)
}

// needsOf returns the steps s needs, directly or not.
func needsOf(s *Step, byName map[string]*Step) map[string]bool {
	seen := map[string]bool{}
	var walk func(*Step)
	walk = func(s *Step) {
		for _, n := range s.Needs {
			if !seen[n] && byName[n] != nil {
				seen[n] = true
				walk(byName[n])
			}
		}
	}
	walk(s)
	return seen
}

// findCycle returns a cycle of needs, nil when there is none.
func findCycle(steps []Step, byName map[string]*Step) []string {
	state := map[string]int{} // 1 visiting, 2 done
	var path []string
	var visit func(name string) []string
	visit = func(name string) []string {
		switch state[name] {
		case 1:
			i := slices.Index(path, name)
			return append(slices.Clone(path[i:]), name)
		case 2:
			return nil
		}
		state[name] = 1
		path = append(path, name)
		for _, n := range byName[name].Needs {
			if c := visit(n); c != nil {
				return c
			}
		}
		path = path[:len(path)-1]
		state[name] = 2
		return nil
	}
	for _, s := range steps {
		if c := visit(s.Name); c != nil {
			return c
		}
	}
	return nil
}

// Observer is told how each step ended (for metrics): its workflow, its
// name, its outcome (ok, tool_error, failed, cancelled, skipped) and how
// long it ran (zero when skipped).
type Observer func(workflow, step, outcome string, d time.Duration)

// Workflows is the tool source of a set of workflows.
type Workflows struct {
	list    []Workflow
	log     *slog.Logger
	observe Observer
}

// New returns the source of list (each passed Check); observe, if not
// nil, is told how each step ended.
func New(list []Workflow, log *slog.Logger, observe Observer) *Workflows {
	if log == nil {
		log = slog.Default()
	}
	return &Workflows{list: list, log: log, observe: observe}
}

// Register adds the workflows as tools of ts: task tools (Required: a
// workflow's steps are tasks), run again after a crash (their steps are
// found, not started again).
func (ws *Workflows) Register(_ context.Context, ts *mcptask.Server) error {
	for i := range ws.list {
		w := &ws.list[i]
		if err := Check(*w); err != nil {
			return err
		}
		schema := any(w.InputSchema)
		if w.InputSchema == nil {
			schema = map[string]any{"type": "object"}
		}
		tool := &mcp.Tool{Name: w.Name, Description: w.Description, InputSchema: schema}
		mcptask.AddTool(ts, tool, func(ctx context.Context, _ *mcp.CallToolRequest, args map[string]any) (*mcp.CallToolResult, any, error) {
			return ws.run(ctx, w, args)
		}, mcptask.ToolOptions{Support: mcptask.Required, Rerunnable: true})
	}
	return nil
}

// Health reports nothing: a workflow depends on its steps' tools, whose
// sources report their own.
func (ws *Workflows) Health() map[string]error { return nil }

// Close does nothing: a workflow's work stops with its task.
func (ws *Workflows) Close() error { return nil }

// stepState is what a run knows of a step.
type stepState struct {
	step     *Step
	outcome  string // "" until it ends: ok, tool_error, failed, cancelled, skipped
	value    any    // its result's value (see valueOf)
	taskID   string
	attempts int
	message  string // why it did not complete
	running  bool
}

// outcomeOK reports whether the step let the workflow go on.
func (st *stepState) ended() bool { return st.outcome != "" }

// done is a step that ended, sent back to the scheduler.
type done struct {
	name    string
	outcome string
	value   any
	taskID  string
	tries   int
	message string
	took    time.Duration
}

// run runs workflow w with args as the work of the task in ctx.
func (ws *Workflows) run(ctx context.Context, w *Workflow, args map[string]any) (*mcp.CallToolResult, any, error) {
	tk := mcptask.FromContext(ctx)
	if tk == nil {
		return nil, nil, errors.New("a workflow runs as a task")
	}
	if args == nil {
		args = map[string]any{}
	}
	sc := &scope{args: args, steps: map[string]*stepState{}, notes: map[string]string{}}
	for i := range w.Steps {
		sc.steps[w.Steps[i].Name] = &stepState{step: &w.Steps[i]}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	running := map[string]*mcptask.Child{}
	var mu sync.Mutex // guards running, stopping and sc.notes
	results := make(chan done)
	// A step's note (waiting for its approval) changes the status
	// message: refresh wakes the loop to write it.
	refresh := make(chan struct{}, 1)
	note := func(step, msg string) {
		mu.Lock()
		if msg == "" {
			delete(sc.notes, step)
		} else {
			sc.notes[step] = msg
		}
		mu.Unlock()
		select {
		case refresh <- struct{}{}:
		default:
		}
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	stopping := false // a failure ends the workflow: steps started now are cancelled
	failed := ""      // the step whose failure ends the workflow
	shown := ""       // the status message written last
	for {
		// Start every step that is ready, in declaration order, again
		// while a pass ends a step at once (skipped, or its arguments
		// failed): steps declared before it may need it.
		for again := true; again; {
			again = false
			for i := range w.Steps {
				s := &w.Steps[i]
				st := sc.steps[s.Name]
				if failed != "" || st.ended() || st.running || !ready(s, sc) {
					continue
				}
				if w.MaxParallel > 0 && countRunning(sc) >= w.MaxParallel {
					break
				}
				if !mustParse(s.When).holds(sc) {
					st.outcome, again = "skipped", true
					tk.Logf("step %s skipped: %s does not hold", s.Name, s.When)
					ws.observeStep(w.Name, s.Name, "skipped", 0)
					continue
				}
				in, err := sc.render(map[string]any(s.Arguments))
				if err != nil {
					st.outcome, st.message, again = "failed", "its arguments: "+err.Error(), true
					tk.Logf("step %s failed: %s", s.Name, st.message)
					ws.observeStep(w.Name, s.Name, "failed", 0)
					if !s.ContinueOnError {
						failed = s.Name
					}
					continue
				}
				st.running = true
				wg.Add(1)
				go func() {
					defer wg.Done()
					d := ws.runStep(ctx, tk, s, in, func(c *mcptask.Child) bool {
						mu.Lock()
						defer mu.Unlock()
						if stopping {
							return false
						}
						running[s.Name] = c
						return true
					}, func(msg string) { note(s.Name, msg) })
					select {
					case results <- d:
					case <-ctx.Done():
					}
				}()
			}
		}
		mu.Lock()
		msg := progress(w, sc)
		mu.Unlock()
		if msg != shown {
			// (A round that changed nothing writes nothing.)
			shown = msg
			_ = tk.SetStatusMessage(ctx, msg)
		}
		if countRunning(sc) == 0 {
			break
		}
		var d done
		select {
		case d = <-results:
		case <-refresh:
			continue
		case <-ctx.Done():
			return nil, nil, context.Cause(ctx)
		}
		st := sc.steps[d.name]
		st.running = false
		st.outcome, st.value, st.taskID, st.attempts, st.message = d.outcome, d.value, d.taskID, d.tries, d.message
		mu.Lock()
		delete(running, d.name)
		mu.Unlock()
		ws.observeStep(w.Name, d.name, d.outcome, d.took)
		if d.outcome == "ok" || d.outcome == "skipped" {
			tk.Logf("step %s completed (task %s)", d.name, d.taskID)
			continue
		}
		tk.Logf("step %s %s (task %s): %s", d.name, d.outcome, d.taskID, d.message)
		if !st.step.ContinueOnError && failed == "" {
			failed = d.name
			// The workflow fails: the steps that run are cancelled, and
			// those being started are as soon as they are.
			mu.Lock()
			stopping = true
			for name, c := range running {
				if err := c.Cancel(context.WithoutCancel(ctx)); err != nil {
					tk.Logf("cancelling step %s: %v", name, err)
				}
			}
			mu.Unlock()
		}
	}
	return summary(w, sc, failed), nil, nil
}

// observeStep tells the observer, if any, how a step ended.
func (ws *Workflows) observeStep(workflow, step, outcome string, d time.Duration) {
	if ws.observe != nil {
		ws.observe(workflow, step, outcome, d)
	}
}

// mustParse parses a condition Check accepted.
func mustParse(when string) *condition {
	c, _ := parseCondition(when)
	return c
}

// ready reports whether every step s needs has ended.
func ready(s *Step, sc *scope) bool {
	for _, n := range s.Needs {
		if !sc.steps[n].ended() {
			return false
		}
	}
	return true
}

func countRunning(sc *scope) int {
	n := 0
	for _, st := range sc.steps {
		if st.running {
			n++
		}
	}
	return n
}

// runStep runs step s with its arguments in: attempt after attempt, each
// a child task (step name s.Name, then s.Name#2, ...), within its
// timeout.
//
// started is told of each attempt's child (false: cancel it, the
// workflow is failing); note is told what a held step waits for (its
// approval), "" once it no longer does.
func (ws *Workflows) runStep(ctx context.Context, tk *mcptask.Task, s *Step, in any, started func(*mcptask.Child) bool, note func(string)) done {
	d := done{name: s.Name}
	begin := time.Now()
	for attempt := 1; attempt <= s.Retries+1; attempt++ {
		d.tries = attempt
		name := s.Name
		if attempt > 1 {
			name = fmt.Sprintf("%s#%d", s.Name, attempt)
		}
		c, err := spawn(ctx, tk, s.Tool, in, &mcptask.SpawnOptions{Step: name, Approval: s.Approval})
		if err != nil {
			d.outcome, d.message = "failed", err.Error()
			if ctx.Err() != nil {
				d.outcome = "cancelled"
			}
			break
		}
		d.taskID = c.ID()
		if !started(c) {
			// The workflow is failing: the step is cancelled (after
			// a re-run too, which finds it).
			_ = c.Cancel(context.WithoutCancel(ctx))
		}
		if s.Approval != nil {
			// Held for its approval: the workflow's message says so.
			var ce *mcptask.ChildError
			if _, err := c.Result(ctx); errors.As(err, &ce) && ce.Status == "working" && strings.HasPrefix(ce.Message, "waiting for approval") {
				note(ce.Message)
			}
		}
		wctx, cancel := ctx, context.CancelFunc(func() {})
		if s.Timeout > 0 {
			wctx, cancel = context.WithDeadline(ctx, c.CreatedAt().Add(s.Timeout))
		}
		res, err := c.Wait(wctx)
		if s.Approval != nil {
			note("")
		}
		timedOut := err != nil && wctx.Err() != nil && ctx.Err() == nil
		cancel()
		if timedOut {
			_ = c.Cancel(context.WithoutCancel(ctx))
			d.outcome, d.message = "failed", fmt.Sprintf("timed out after %s", s.Timeout)
			continue
		}
		var ce *mcptask.ChildError
		switch {
		case err == nil && !res.IsError:
			d.outcome, d.value, d.message = "ok", valueOf(res), ""
			d.took = time.Since(begin)
			return d
		case err == nil:
			d.outcome, d.value, d.message = "tool_error", valueOf(res), capText(textOfResult(res))
		case errors.As(err, &ce) && ce.Status == "cancelled" && s.Timeout > 0 && !time.Now().Before(c.CreatedAt().Add(s.Timeout)):
			// Cancelled by a run of this workflow when it timed out (a
			// re-run after a crash reads it so, and retries as that
			// run did).
			d.outcome, d.message = "failed", fmt.Sprintf("timed out after %s", s.Timeout)
		case errors.As(err, &ce) && ce.Status == "cancelled":
			d.outcome, d.message = "cancelled", ce.Message
			d.took = time.Since(begin)
			return d // a cancelled step is not retried
		case errors.As(err, &ce) && ce.Code == wire.CodeNotApproved:
			d.outcome, d.message = "failed", ce.Message
			d.took = time.Since(begin)
			return d // a denial (or expiry) is not asked again
		case errors.As(err, &ce):
			d.outcome, d.message = "failed", ce.Message
		default:
			d.outcome, d.message = "cancelled", err.Error() // the workflow stops
			d.took = time.Since(begin)
			return d
		}
	}
	d.took = time.Since(begin)
	return d
}

// valueOf is what ${steps.NAME} reads of a step's result: its
// structuredContent, else its text parsed as JSON, else its text.
func valueOf(res *mcp.CallToolResult) any {
	if res.StructuredContent != nil {
		b, err := json.Marshal(res.StructuredContent)
		var v any
		if err == nil && json.Unmarshal(b, &v) == nil {
			return v
		}
	}
	txt := textOfResult(res)
	var v any
	if json.Unmarshal([]byte(txt), &v) == nil {
		return v
	}
	return txt
}

// textOfResult joins the text contents of a result.
func textOfResult(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, t.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// progress is the workflow's status message: the steps that run (or
// wait for an approval), and how many of all have ended.
func progress(w *Workflow, sc *scope) string {
	var run []string
	ended := 0
	for _, s := range w.Steps {
		st := sc.steps[s.Name]
		switch {
		case st.running && sc.notes[s.Name] != "":
			run = append(run, s.Name+" ("+sc.notes[s.Name]+")")
		case st.running:
			run = append(run, s.Name)
		case st.ended():
			ended++
		}
	}
	if len(run) == 0 {
		return fmt.Sprintf("%d of %d steps ended", ended, len(w.Steps))
	}
	return fmt.Sprintf("running %s (%d of %d steps ended)", strings.Join(run, ", "), ended, len(w.Steps))
}

// summary is the workflow's result: a line per step, and a structured
// result {"outcome": "ok" or "failed", "failedStep": ..., "steps":
// {NAME: {"outcome", "taskId", "attempts", "result", "message"}}}; it is
// a tool error when a step's failure ended the workflow.
func summary(w *Workflow, sc *scope, failed string) *mcp.CallToolResult {
	steps := map[string]any{}
	var lines []string
	for _, s := range w.Steps {
		st := sc.steps[s.Name]
		outcome := st.outcome
		if outcome == "" {
			outcome = "not_started"
		}
		e := map[string]any{"outcome": outcome}
		if st.taskID != "" {
			e["taskId"], e["attempts"] = st.taskID, st.attempts
		}
		if st.value != nil {
			if b, _ := json.Marshal(st.value); len(b) <= MaxStepResult {
				e["result"] = st.value
			} else {
				e["resultBytes"] = len(b) // read the step's own task for it
			}
		}
		if st.message != "" {
			e["message"] = st.message
		}
		steps[s.Name] = e
		line := fmt.Sprintf("%s: %s", s.Name, outcome)
		if st.message != "" {
			line += " (" + st.message + ")"
		}
		lines = append(lines, line)
	}
	if failed == "" {
		for _, s := range w.Steps {
			if sc.steps[s.Name].outcome == "" {
				// Never ready: not a success (a bug, were it to happen).
				failed = s.Name
				break
			}
		}
	}
	out := map[string]any{"outcome": "ok", "steps": steps}
	res := &mcp.CallToolResult{StructuredContent: out}
	head := fmt.Sprintf("workflow %s completed", w.Name)
	if failed != "" {
		out["outcome"], out["failedStep"] = "failed", failed
		res.IsError = true
		head = fmt.Sprintf("workflow %s failed at step %s", w.Name, failed)
	}
	res.Content = []mcp.Content{&mcp.TextContent{Text: head + "\n" + strings.Join(lines, "\n")}}
	return res
}

// MaxStepResult bounds the JSON of a step's value that the workflow's
// result repeats (and that ${steps.NAME} references read); a larger one
// is left to the step's own task (its result), the workflow's result
// saying its size.
const MaxStepResult = 64 << 10

// capText cuts a step's message to 1 KiB.
func capText(s string) string {
	if len(s) <= 1<<10 {
		return s
	}
	cut := 1 << 10
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// spawn is Task.Spawn, tried again while the store is briefly
// unavailable (for up to a minute), so that a blip does not fail a step.
func spawn(ctx context.Context, tk *mcptask.Task, tool string, in any, o *mcptask.SpawnOptions) (*mcptask.Child, error) {
	for wait, tries := 100*time.Millisecond, 0; ; wait, tries = min(2*wait, 5*time.Second), tries+1 {
		c, err := tk.Spawn(ctx, tool, in, o)
		var je *jsonrpc.Error
		if err == nil || tries >= 15 || !errors.As(err, &je) || je.Code != wire.CodeUnavailable {
			return c, err
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(wait):
		}
	}
}
