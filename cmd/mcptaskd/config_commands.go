package main

import (
	"context"
	"log/slog"

	"github.com/mcptask/mcptask"
)

// CommandConfig is one entry of the configuration file's commands: a
// program run as a tool (see docs/adapters.md).
type CommandConfig struct{}

// validateCommands checks the commands section, expanding its ${NAME} and
// ${file:PATH} references (see expand); each error starts with its line
// (see FileConfig.line).
func (fc *FileConfig) validateCommands(getenv func(string) string) []error { return nil }

// registerCommands adds the commands of fc to ts, before it starts; stop
// (never nil) stops what they started.
func registerCommands(ctx context.Context, ts *mcptask.Server, fc *FileConfig, log *slog.Logger) (stop func() error, err error) {
	return func() error { return nil }, nil
}
