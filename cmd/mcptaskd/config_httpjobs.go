package main

import (
	"context"
	"log/slog"

	"github.com/mcptask/mcptask"
)

// HTTPJobConfig is one entry of the configuration file's httpJobs: a job
// of an HTTP job API run as a tool (see docs/adapters.md).
type HTTPJobConfig struct{}

// validateHTTPJobs checks the httpJobs section, expanding its ${NAME} and
// ${file:PATH} references (see expand); each error starts with its line
// (see FileConfig.line).
func (fc *FileConfig) validateHTTPJobs(getenv func(string) string) []error { return nil }

// registerHTTPJobs adds the HTTP job tools of fc to ts, before it starts;
// stop (never nil) stops what they started.
func registerHTTPJobs(ctx context.Context, ts *mcptask.Server, fc *FileConfig, log *slog.Logger) (stop func() error, err error) {
	return func() error { return nil }, nil
}
