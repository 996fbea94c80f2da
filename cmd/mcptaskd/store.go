package main

import (
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/mcptask/mcptask/store"
	"github.com/mcptask/mcptask/store/postgres"
	"github.com/mcptask/mcptask/store/sqlite"
)

// openStore opens the task store the configuration names: PostgreSQL when
// -postgres is set (shared by many instances), else the SQLite file -db,
// locked so that one mcptaskd at a time uses it (exclusive).
func openStore(cfg Config, logger *slog.Logger) (st store.Store, unlock func(), exclusive bool, err error) {
	if cfg.Postgres != "" {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		pg, err := postgres.Open(ctx, cfg.Postgres, &postgres.Options{Logger: logger, Schema: cfg.PostgresSchema})
		if err != nil {
			return nil, nil, false, fmt.Errorf("opening the PostgreSQL task store: %w", err)
		}
		return pg, func() {}, false, nil
	}
	unlock, err = lockDB(cfg.DB)
	if err != nil {
		return nil, nil, false, err
	}
	lite, err := sqlite.Open(cfg.DB, &sqlite.Options{Logger: logger, Synchronous: sqlite.Sync(cfg.SQLiteSync),
		// The view cache is right only when no other process writes the
		// file: lockDB makes sure of it where it can.
		ViewCache: dbLockHeld && cfg.SQLiteViewCache > 0, ViewCacheEntries: cfg.SQLiteViewCache})
	if err != nil {
		unlock()
		return nil, nil, false, fmt.Errorf("opening the task store %s: %w", cfg.DB, err)
	}
	return lite, unlock, true, nil
}

// instanceID names this process in the tasks it runs: host, PID and a
// random suffix (a restarted process is a new instance).
func instanceID() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("mcptaskd-%s-%d-%s", host, os.Getpid(), rand.Text()[:6])
}
