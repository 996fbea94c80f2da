package gateway

import (
	"context"
	"log/slog"
	"net/url"
	"regexp"
)

// An upstream's URL may carry credentials (?api_key=..., user:password@):
// the gateway never logs them, nor puts them in an error or /healthz.
// Every URL in a text it logs or reports goes through redactURL.

// urlPattern finds the URLs in a text (an error of net/http quotes the
// URL of the request).
var urlPattern = regexp.MustCompile(`[a-zA-Z][a-zA-Z0-9+.-]*://[^\s"'<>]+`)

// redactURL returns raw with its userinfo and the values of its query
// replaced by "REDACTED", and without fragment.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(a URL)"
	}
	if u.User != nil {
		u.User = url.User("REDACTED")
	}
	if u.RawQuery != "" {
		q, err := url.ParseQuery(u.RawQuery)
		if err != nil {
			u.RawQuery = "REDACTED"
		} else {
			for k := range q {
				q[k] = []string{"REDACTED"}
			}
			u.RawQuery = q.Encode()
		}
	}
	u.Fragment, u.RawFragment = "", ""
	return u.String()
}

// redact returns s with every URL in it redacted.
func redact(s string) string {
	return urlPattern.ReplaceAllStringFunc(s, redactURL)
}

// redactErr returns err with every URL of its text redacted (nil for nil).
// The result keeps err's chain for errors.Is and errors.As.
func redactErr(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	if r := redact(msg); r != msg {
		return &redactedError{msg: r, err: err}
	}
	return err
}

type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// redacting is a slog.Handler that redacts the URLs of every message and
// attribute before h sees them.
type redacting struct{ h slog.Handler }

func (r redacting) Enabled(ctx context.Context, l slog.Level) bool { return r.h.Enabled(ctx, l) }

func (r redacting) Handle(ctx context.Context, rec slog.Record) error {
	n := slog.NewRecord(rec.Time, rec.Level, redact(rec.Message), rec.PC)
	rec.Attrs(func(a slog.Attr) bool {
		n.AddAttrs(redactAttr(a))
		return true
	})
	return r.h.Handle(ctx, n)
}

func (r redacting) WithAttrs(as []slog.Attr) slog.Handler {
	out := make([]slog.Attr, len(as))
	for i, a := range as {
		out[i] = redactAttr(a)
	}
	return redacting{r.h.WithAttrs(out)}
}

func (r redacting) WithGroup(name string) slog.Handler { return redacting{r.h.WithGroup(name)} }

func redactAttr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, redact(v.String()))
	case slog.KindGroup:
		g := v.Group()
		out := make([]any, len(g))
		for i, ga := range g {
			out[i] = redactAttr(ga)
		}
		return slog.Group(a.Key, out...)
	case slog.KindAny:
		if e, ok := v.Any().(error); ok {
			return slog.String(a.Key, redact(e.Error()))
		}
		if s, ok := v.Any().(interface{ String() string }); ok {
			return slog.String(a.Key, redact(s.String()))
		}
	}
	return slog.Attr{Key: a.Key, Value: v}
}

// redactLogger returns log with every URL it logs redacted.
func redactLogger(log *slog.Logger) *slog.Logger {
	if _, ok := log.Handler().(redacting); ok {
		return log
	}
	return slog.New(redacting{log.Handler()})
}
