package loadgen

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// LoopbackTransport returns an HTTP transport for conns concurrent callers
// that never uses a proxy and refuses any connection whose peer is not a
// loopback address (a name such as localhost is checked once resolved):
// the load tools send traffic to 127.0.0.0/8 or ::1 only.
func LoopbackTransport(conns int) *http.Transport {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = conns + 4
	tr.MaxIdleConnsPerHost = conns + 4
	tr.DisableCompression = true
	tr.Proxy = nil
	dial := tr.DialContext
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		if ta, ok := conn.RemoteAddr().(*net.TCPAddr); !ok || !ta.IP.IsLoopback() {
			conn.Close()
			return nil, fmt.Errorf("%s: connected to %v: %w", addr, conn.RemoteAddr(), ErrNotLoopback)
		}
		return conn, nil
	}
	return tr
}

// CPUModel returns the first model name of /proc/cpuinfo, or "".
func CPUModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	for line := range strings.Lines(string(b)) {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// DropSchema drops a PostgreSQL schema with everything in it.
func DropSchema(dsn, schema string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return fmt.Errorf("dropping schema %s: %w", schema, err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
		return fmt.Errorf("dropping schema %s: %w", schema, err)
	}
	return nil
}
