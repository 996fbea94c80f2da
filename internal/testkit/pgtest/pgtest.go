// Package pgtest gives tests a PostgreSQL schema of their own on the
// server named by MCPTASK_TEST_POSTGRES_DSN, dropped when the test ends,
// and skips them (saying how to run them) when no server is named.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// DSNEnv names the environment variable holding the test server's DSN.
const DSNEnv = "MCPTASK_TEST_POSTGRES_DSN"

// DSN returns the test server's DSN, or skips the test, saying how to run
// it.
func DSN(t testing.TB) string {
	t.Helper()
	dsn := os.Getenv(DSNEnv)
	if dsn == "" {
		t.Skipf("SKIPPED: needs PostgreSQL: set %s to a database where tests may create and drop schemas, e.g. %s='postgres://postgres@127.0.0.1:5432/test?sslmode=disable'", DSNEnv, DSNEnv)
	}
	return dsn
}

// Schema returns the name of a new schema (prefix and random hex; not
// created: the first store that opens it does), dropped with CASCADE when
// the test ends. Call it before starting what uses it, so that its cleanup
// runs after theirs.
func Schema(t testing.TB, dsn, prefix string) string {
	t.Helper()
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	schema := prefix + hex.EncodeToString(b)
	t.Cleanup(func() {
		if err := Drop(dsn, schema); err != nil {
			t.Errorf("dropping schema %s: %v", schema, err)
		}
	})
	return schema
}

// Drop drops schema with CASCADE, if it exists.
func Drop(dsn, schema string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
	return err
}
