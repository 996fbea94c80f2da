package servertest

import (
	"context"
	"fmt"
	"sync"

	"github.com/mcptask/mcptask"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Stepper is a tool that moves as a test allows: a run labelled L takes
// Steps steps, each setting the status message "step N" when the test
// calls Step(L), then ends with the text "done L" at the Step after the
// last. Register its Run with mcptask.AddTool.
type Stepper struct {
	mu    sync.Mutex
	gates map[string]chan struct{}
}

// StepArgs are the arguments of a Stepper's tool.
type StepArgs struct {
	Label string `json:"label"`
	Steps int    `json:"steps"`
}

func (s *Stepper) gate(label string) chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gates == nil {
		s.gates = map[string]chan struct{}{}
	}
	g, ok := s.gates[label]
	if !ok {
		g = make(chan struct{})
		s.gates[label] = g
	}
	return g
}

// Step lets the run labelled label take its next step; it blocks until
// the run takes it.
func (s *Stepper) Step(label string) { s.gate(label) <- struct{}{} }

// Run is the tool's handler.
func (s *Stepper) Run(ctx context.Context, _ *mcp.CallToolRequest, in StepArgs) (*mcp.CallToolResult, any, error) {
	g := s.gate(in.Label)
	for i := 0; ; i++ {
		select {
		case <-g:
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
		if i == in.Steps {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "done " + in.Label}}}, nil, nil
		}
		if err := mcptask.FromContext(ctx).SetStatusMessage(ctx, fmt.Sprintf("step %d", i+1)); err != nil {
			return nil, nil, err
		}
	}
}
