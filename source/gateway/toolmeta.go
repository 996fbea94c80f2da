package gateway

import (
	"maps"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// toolMeta returns the _meta of the upstream tool t as the gateway lists
// it: t's own, with the entries of Upstream.ToolMeta["*"] and then
// Upstream.ToolMeta[t.Name] set over it. It never changes t's map.
func (u *upstream) toolMeta(t *mcp.Tool) mcp.Meta {
	all, own := u.cfg.ToolMeta["*"], u.cfg.ToolMeta[t.Name]
	if len(all) == 0 && len(own) == 0 {
		return t.Meta
	}
	m := make(mcp.Meta, len(t.Meta)+len(all)+len(own))
	maps.Copy(m, t.Meta)
	maps.Copy(m, all)
	maps.Copy(m, own)
	return m
}
