package client

import (
	"context"
	"errors"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// clientImpl holds the connection; its methods do the work of Client.
// (Skeleton: to be implemented.)
type clientImpl struct {
	wire string
}

var errTODO = errors.New("client: not implemented yet")

func dial(ctx context.Context, url string, opts *Options) (*Client, error) { return nil, errTODO }
func connect(ctx context.Context, t mcp.Transport, target string, opts *Options) (*Client, error) {
	return nil, errTODO
}
func (c *clientImpl) close() error                              { return errTODO }
func (c *clientImpl) tasksSupported() bool                      { return false }
func (c *clientImpl) tools(ctx context.Context) ([]Tool, error) { return nil, errTODO }
func (c *clientImpl) callTool(ctx context.Context, name string, args any) (*Call, error) {
	return nil, errTODO
}
func (c *clientImpl) wait(ctx context.Context, id string, o *WaitOptions) (*mcp.CallToolResult, error) {
	return nil, errTODO
}
func (c *clientImpl) get(ctx context.Context, id string) (*TaskStatus, error)    { return nil, errTODO }
func (c *clientImpl) cancel(ctx context.Context, id string) (*TaskStatus, error) { return nil, errTODO }
func (c *clientImpl) list(ctx context.Context, cursor string) ([]TaskStatus, string, error) {
	return nil, "", errTODO
}
func (c *clientImpl) pending() ([]JournalEntry, error) { return nil, errTODO }
func (c *clientImpl) resume(ctx context.Context, o *WaitOptions) ([]Outcome, error) {
	return nil, errTODO
}
