package main

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/mcptask/mcptask"
	"github.com/mcptask/mcptask/source/workflow"
)

// WorkflowConfig is one entry of the configuration file's workflows: a
// tool made of steps that call other tools, each a child task (see
// docs/workflows.md).
//
//	workflows:
//	  release:
//	    description: Build, test, approve and deploy a service
//	    inputSchema:
//	      type: object
//	      properties: {service: {type: string}, ref: {type: string}}
//	      required: [service, ref]
//	    maxParallel: 4                  # steps running at once (default: no bound)
//	    steps:
//	      - name: build
//	        tool: build                 # any task tool of this server
//	        arguments: {ref: "${args/ref}"}
//	      - name: unit
//	        tool: tests
//	        needs: [build]
//	        arguments: {suite: unit, artifact: "${steps.build/artifact}"}
//	        retries: 2
//	        timeout: 20m
//	      - name: deploy
//	        tool: deploy
//	        needs: [unit]
//	        when: "${args/env} == prod"
//	        approval: {approvers: [alice, bob], expires: 4h, reason: production}
//	        continueOnError: false
type WorkflowConfig struct {
	Description string               `yaml:"description"`
	InputSchema map[string]any       `yaml:"inputSchema"`
	MaxParallel int                  `yaml:"maxParallel"`
	Steps       []WorkflowStepConfig `yaml:"steps"`
	workflow    *workflow.Workflow   // resolved by validateWorkflows
}

// WorkflowStepConfig is one step of a workflow.
type WorkflowStepConfig struct {
	Name            string          `yaml:"name"`
	Tool            string          `yaml:"tool"`
	Arguments       map[string]any  `yaml:"arguments"`
	Needs           []string        `yaml:"needs"`
	When            string          `yaml:"when"`
	Retries         int             `yaml:"retries"`
	Timeout         Duration        `yaml:"timeout"`
	ContinueOnError bool            `yaml:"continueOnError"`
	Approval        *ApprovalConfig `yaml:"approval"`
}

// validateWorkflows checks the workflows section (workflow.Check); each
// error starts with its line.
func (fc *FileConfig) validateWorkflows() []error {
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(fc.Workflows)) {
		wc := fc.Workflows[name]
		at := func(path ...string) int { return fc.line(append([]string{"workflows", name}, path...)...) }
		if name == "" || !toolNamePattern.MatchString(name) || len(name) > 128 {
			errs = append(errs, fmt.Errorf("%d: workflows.%s: %q is not a tool name: want letters, digits, '_', '-' or '.'", at(), name, name))
			continue
		}
		for _, other := range []struct {
			section string
			taken   bool
		}{{"commands", fc.Commands[name].Argv != nil}, {"httpJobs", hasKey(fc.HTTPJobs, name)}} {
			if other.taken {
				errs = append(errs, fmt.Errorf("%d: workflows.%s: the name is also a %s entry's: a tool name names one tool", at(), name, other.section))
			}
		}
		w := workflow.Workflow{Name: name, Description: wc.Description, InputSchema: wc.InputSchema, MaxParallel: wc.MaxParallel}
		n := len(errs)
		for _, sc := range wc.Steps {
			s := workflow.Step{Name: sc.Name, Tool: sc.Tool, Arguments: sc.Arguments, Needs: sc.Needs, When: sc.When,
				Retries: sc.Retries, Timeout: time.Duration(sc.Timeout), ContinueOnError: sc.ContinueOnError}
			if a := sc.Approval; a != nil {
				s.Approval = &mcptask.Approval{Approvers: a.Approvers, Reason: a.Reason, SelfApproval: a.SelfApproval}
				if a.Expires != "" {
					d, err := time.ParseDuration(a.Expires)
					if err != nil || d <= 0 {
						errs = append(errs, fmt.Errorf("%d: workflows.%s.steps.%s.approval.expires: %q: want a positive duration such as 1h", at("steps", sc.Name, "approval"), name, sc.Name, a.Expires))
					}
					s.Approval.Expires = d
				}
			}
			w.Steps = append(w.Steps, s)
		}
		if err := workflow.Check(w); err != nil {
			for _, e := range unjoin(err) {
				// "workflows.NAME.steps.STEP: ..." → its line.
				path := strings.SplitN(strings.SplitN(e.Error(), ":", 2)[0], ".", 4)
				line := at()
				if len(path) == 4 {
					line = at("steps", path[3])
				}
				errs = append(errs, fmt.Errorf("%d: %v", line, e))
			}
		}
		if len(errs) == n {
			wc.workflow = &w
			fc.Workflows[name] = wc
		}
	}
	return errs
}

func hasKey[V any](m map[string]V, k string) bool {
	_, ok := m[k]
	return ok
}

// unjoin returns the errors errors.Join joined (err itself otherwise).
func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// workflows returns the file's workflows, in name order.
func (fc *FileConfig) workflows() []workflow.Workflow {
	if fc == nil {
		return nil
	}
	var out []workflow.Workflow
	for _, name := range slices.Sorted(maps.Keys(fc.Workflows)) {
		if w := fc.Workflows[name].workflow; w != nil {
			out = append(out, *w)
		}
	}
	return out
}

// describeWorkflows is what -check-config says of the workflows.
func (fc *FileConfig) describeWorkflows() []string {
	var out []string
	for _, w := range fc.workflows() {
		var steps []string
		for _, s := range w.Steps {
			d := s.Name + "=" + s.Tool
			if len(s.Needs) > 0 {
				d += "(after " + strings.Join(s.Needs, ",") + ")"
			}
			if s.Approval != nil {
				d += "[approval]"
			}
			steps = append(steps, d)
		}
		out = append(out, fmt.Sprintf("workflow %s: %s", w.Name, strings.Join(steps, " ")))
	}
	return out
}
