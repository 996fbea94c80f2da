package gateway

import (
	"net/http"
	"os"
	"os/exec"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// transport returns a new go-sdk transport to the upstream, the one place
// that chooses it: for a Command upstream, its program as a child process
// (its directory, the environment with the upstream's Env added, its
// stderr into the log, killed with mcptaskd); else Streamable HTTP to its
// URL through hc.
func (u *upstream) transport(hc *http.Client) mcp.Transport {
	if u.cfg.Command == "" {
		return &mcp.StreamableClientTransport{Endpoint: u.cfg.URL, HTTPClient: hc}
	}
	cmd := exec.Command(u.cfg.Command, u.cfg.Args...)
	cmd.Dir = u.cfg.Dir
	cmd.Env = os.Environ()
	for k, v := range u.cfg.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stderr = &logWriter{log: u.log}
	dieWithParent(cmd)
	return &mcp.CommandTransport{Command: cmd}
}
