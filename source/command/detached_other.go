//go:build !linux

package command

import (
	"context"
	"errors"

	"github.com/mcptask/mcptask"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// detachedSupported: commands cannot survive a restart here (Tool.Check
// refuses SurvivesRestart).
const detachedSupported = false

const (
	detachedMode      = "detached"
	detachedStartWait = 0
)

func superviseDetached([]string) int { return 2 }

func sweepDetachedRuns() {}

func (c *Commands) runDetached(context.Context, *tool, []string, *mcptask.Task) (*mcp.CallToolResult, error) {
	return nil, errors.New("commands: survivesRestart is supported on Linux only")
}
