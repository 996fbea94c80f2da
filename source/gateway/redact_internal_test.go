package gateway

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
)

// TestRedact: the userinfo and the query values of every URL in a text,
// an error or a log record are replaced; the rest is kept.
func TestRedact(t *testing.T) {
	for in, want := range map[string]string{
		`Post "http://127.0.0.1:9/mcp?api_key=s3cret&x=1": EOF`: `Post "http://127.0.0.1:9/mcp?api_key=REDACTED&x=REDACTED": EOF`,
		"https://user:pass@example.com/mcp":                     "https://REDACTED@example.com/mcp",
		"no URL here":                                           "no URL here",
		"http://example.com/mcp#frag and https://h/?t=x":        "http://example.com/mcp and https://h/?t=REDACTED",
	} {
		if got := redact(in); got != want {
			t.Errorf("redact(%q) = %q, want %q", in, got, want)
		}
	}
	base := io.ErrUnexpectedEOF
	err := redactErr(&wrapped{msg: "Post http://h/mcp?api_key=s3cret", err: base})
	if strings.Contains(err.Error(), "s3cret") || !errors.Is(err, base) {
		t.Errorf("redactErr: %v (Is %v: %v)", err, base, errors.Is(err, base))
	}
	var buf bytes.Buffer
	log := redactLogger(slog.New(slog.NewTextHandler(&buf, nil))).With("url", "http://h/?api_key=s3cret")
	log.Warn("dial http://u:s3cret@h/", "err", errors.New("GET http://h/?k=s3cret"), slog.Group("g", "u", "http://h/?k=s3cret"))
	if strings.Contains(buf.String(), "s3cret") || !strings.Contains(buf.String(), "REDACTED") {
		t.Errorf("the log record: %s", buf.String())
	}
}

type wrapped struct {
	msg string
	err error
}

func (w *wrapped) Error() string { return w.msg }
func (w *wrapped) Unwrap() error { return w.err }
