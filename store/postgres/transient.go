package postgres

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"
)

// Transient implements [store.ErrorClassifier]: err is transient when the
// server could not be reached or dropped the connection (refused, reset,
// closed, a restart: SQLSTATE classes 08 and 57P01-57P03, too many
// connections), or the transaction lost a conflict (serialization
// failure, deadlock). A done context and the store's own errors are not.
func (s *Store) Transient(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrClosed) {
		return false
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "57P01", // admin_shutdown: the server is stopping or restarting
			"57P02", // crash_shutdown
			"57P03", // cannot_connect_now: the server is starting
			"53300", // too_many_connections
			"40001", // serialization_failure
			"40P01": // deadlock_detected
			return true
		}
		return strings.HasPrefix(pgErr.Code, "08") // connection exceptions
	}
	var connectErr *pgconn.ConnectError
	var netErr net.Error
	return errors.As(err, &connectErr) || errors.As(err, &netErr) || pgconn.SafeToRetry(err) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}
