package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/mcptask/mcptask"
	"github.com/mcptask/mcptask/demo"
	"github.com/mcptask/mcptask/metrics"
	"github.com/mcptask/mcptask/source/command"
	"github.com/mcptask/mcptask/source/gateway"
	"github.com/mcptask/mcptask/source/httpjob"
	"github.com/mcptask/mcptask/source/workflow"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// source is one tool source of mcptaskd's configuration: the gateway's
// upstreams (source/gateway), commands (source/command), HTTP job APIs
// (source/httpjob), the demo tools and the job tools. Register adds its
// tools to the server before it starts (its recovery of unfinished tasks
// asks every tool whether it may run again); Health reports what it
// depends on, by name (nil when it depends on nothing that can be down);
// Close stops what it started.
type source interface {
	Register(ctx context.Context, ts *mcptask.Server) error
	Health() map[string]error
	Close() error
}

// registerTimeout bounds the registration of the tool sources (the
// gateway's first contact with its upstreams: one that cannot be reached
// in time does not stop the start, its tools are added once it answers).
const registerTimeout = time.Minute

// toolSources are the tool sources of a configuration, in registration
// order: the demo tools, the gateway's upstreams, commands, HTTP job
// APIs, and last the job tools (which must not take another tool's name).
type toolSources struct {
	list      []source
	gateway   *gateway.Gateway    // nil without upstreams
	httpJobs  *httpjob.Tools      // nil without HTTP job tools
	workflows *workflow.Workflows // nil without workflows
	metrics   *metrics.Metrics    // where the workflows' steps are counted (set by register)
}

// newToolSources returns the tool sources fc declares; none is started.
// addTool adds a tool to the server once it runs (an upstream that was
// down at start-up).
func newToolSources(fc *FileConfig, log *slog.Logger, addTool func(*mcp.Tool, mcp.ToolHandler)) *toolSources {
	s := &toolSources{}
	if fc.demoEnabled() {
		s.list = append(s.list, demoSource{})
	}
	if ups := fc.upstreams(); len(ups) > 0 {
		s.gateway = gateway.New(ups, log.With("component", "gateway"), &gateway.Options{AddTool: addTool})
		s.list = append(s.list, s.gateway)
	}
	if tools := fc.commandTools(); len(tools) > 0 {
		s.list = append(s.list, commandSource{command.New(tools, log.With("component", "commands"))})
	}
	if tools := fc.httpJobTools(); len(tools) > 0 {
		client := &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
		s.httpJobs = httpjob.New(tools, client, log.With("component", "httpjobs"))
		s.list = append(s.list, httpJobSource{s.httpJobs})
	}
	if wfs := fc.workflows(); len(wfs) > 0 {
		s.workflows = workflow.New(wfs, log.With("component", "workflows"), func(wf, step, outcome string, d time.Duration) {
			if s.metrics != nil {
				s.metrics.WorkflowStep(wf, step, outcome, d)
			}
		})
		s.list = append(s.list, s.workflows)
	}
	if fc != nil && fc.JobTools.Enabled {
		s.list = append(s.list, jobToolSource{prefix: fc.JobTools.prefix(), log: log})
	}
	return s
}

// register registers every source on ts, and exports on m (if not nil)
// the health of the upstreams and job APIs. On an error the caller
// closes the sources.
func (s *toolSources) register(ts *mcptask.Server, m *metrics.Metrics) error {
	ctx, cancel := context.WithTimeout(context.Background(), registerTimeout)
	defer cancel()
	s.metrics = m
	for _, src := range s.list {
		if err := src.Register(ctx, ts); err != nil {
			return err
		}
	}
	if m == nil {
		return nil
	}
	if s.gateway != nil {
		if err := m.CollectUpstreams(s.gateway.Health); err != nil {
			return err
		}
	}
	if s.httpJobs != nil {
		return m.CollectJobAPIs(s.httpJobs.Health)
	}
	return nil
}

// Close closes every source (none for a nil s).
func (s *toolSources) Close() error {
	if s == nil {
		return nil
	}
	var errs []error
	for _, src := range s.list {
		errs = append(errs, src.Close())
	}
	return errors.Join(errs...)
}

// commandSource is source/command's source, its errors in the configuration's
// words ("commands.NAME: ...").
type commandSource struct{ *command.Commands }

// Register registers the commands.
func (c commandSource) Register(ctx context.Context, ts *mcptask.Server) error {
	if err := c.Commands.Register(ctx, ts); err != nil {
		return errors.New(strings.Replace(err.Error(), "commands: ", "commands.", 1))
	}
	return nil
}

// httpJobSource is source/httpjob's source, its errors under "httpJobs: ".
type httpJobSource struct{ *httpjob.Tools }

// Register registers the HTTP job tools.
func (h httpJobSource) Register(ctx context.Context, ts *mcptask.Server) error {
	if err := h.Tools.Register(ctx, ts); err != nil {
		return fmt.Errorf("httpJobs: %w", err)
	}
	return nil
}

// demoSource is the demo's tools (package demo), on unless the
// configuration says demo: false.
type demoSource struct{}

// Register adds the demo tools.
func (demoSource) Register(_ context.Context, ts *mcptask.Server) error {
	demo.Register(ts)
	return nil
}

// Health is nil: the demo tools depend on nothing.
func (demoSource) Health() map[string]error { return nil }

// Close does nothing.
func (demoSource) Close() error { return nil }

// jobToolSource is the job tools (mcptask.Server.AddJobTools): ordinary tools
// that start and follow tasks, for clients without task support.
type jobToolSource struct {
	prefix string
	log    *slog.Logger
}

// Register adds the job tools, refusing to replace a tool of their names.
func (j jobToolSource) Register(_ context.Context, ts *mcptask.Server) error {
	names := mcptask.JobToolNames(j.prefix)
	for _, name := range names {
		if ts.HasTool(name) {
			return fmt.Errorf("jobTools: the job tool %s would replace a tool of that name: choose another jobTools.prefix", name)
		}
	}
	ts.AddJobTools(j.prefix)
	j.log.Info("job tools on: clients without task support can start and follow tasks as ordinary tools", "tools", names)
	return nil
}

// Health is nil: the job tools depend on the task store only.
func (jobToolSource) Health() map[string]error { return nil }

// Close does nothing.
func (jobToolSource) Close() error { return nil }
