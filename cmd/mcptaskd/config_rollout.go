package main

import (
	"fmt"
	"time"

	"github.com/mcptask/mcptask"
)

// RolloutToolConfig is one tool's entry of the configuration file's
// rollout section: its verified fallback and its approval.
//
//	rollout:
//	  deploy:
//	    fallback: handoff     # refuse (default), sync, handoff or jobs
//	    approval:
//	      approvers: [alice, bob]   # operators (-admin-token-file names); "*" any
//	      expires: 1h
//	      reason: production change
//	      selfApproval: false
type RolloutToolConfig struct {
	Fallback string          `yaml:"fallback"`
	Approval *ApprovalConfig `yaml:"approval"`
}

// ApprovalConfig is a tool's approval (mcptask.Approval).
type ApprovalConfig struct {
	Approvers    []string `yaml:"approvers"`
	Expires      string   `yaml:"expires"`
	Reason       string   `yaml:"reason"`
	SelfApproval bool     `yaml:"selfApproval"`
}

// validateRollout checks the rollout section.
func (fc *FileConfig) validateRollout() []error {
	var errs []error
	for name, rc := range fc.Rollout {
		switch rc.Fallback {
		case "", "refuse", "sync", "handoff", "jobs":
		default:
			errs = append(errs, fmt.Errorf("rollout.%s.fallback: %q: want refuse, sync, handoff or jobs", name, rc.Fallback))
		}
		if a := rc.Approval; a != nil {
			if len(a.Approvers) == 0 {
				errs = append(errs, fmt.Errorf("rollout.%s.approval.approvers: name at least one approver", name))
			}
			if a.Expires != "" {
				if d, err := time.ParseDuration(a.Expires); err != nil || d <= 0 {
					errs = append(errs, fmt.Errorf("rollout.%s.approval.expires: %q: want a positive duration such as 1h", name, a.Expires))
				}
			}
		}
	}
	return errs
}

// applyRollout sets the fallback and approval of the tools the rollout
// section names, registered already; an unknown tool is an error.
func applyRollout(fc *FileConfig, ts *mcptask.Server) error {
	if fc == nil {
		return nil
	}
	for name, rc := range fc.Rollout {
		if !ts.HasTool(name) {
			return fmt.Errorf("rollout.%s: no task tool of that name", name)
		}
		var ap *mcptask.Approval
		if a := rc.Approval; a != nil {
			ap = &mcptask.Approval{Approvers: a.Approvers, Reason: a.Reason, SelfApproval: a.SelfApproval}
			ap.Expires, _ = time.ParseDuration(a.Expires)
		}
		if err := ts.SetToolRollout(name, mcptask.DrainFallback(rc.Fallback), ap); err != nil {
			return err
		}
	}
	return nil
}
