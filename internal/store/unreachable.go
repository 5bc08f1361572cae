package store

import (
	"errors"
	"io"
	"net"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// IsUnreachable reports whether err says the store could not be reached: a connection
// to PostgreSQL that could not be made or was lost (the server stopped, restarting,
// its network gone), or the server refusing work while it shuts down or starts up
// (SQLSTATE class 08, 57P01 to 57P03). The operation may be retried once the database
// is back; one whose connection was lost at its commit may have been carried out.
func IsUnreachable(err error) bool {
	if err == nil {
		return false
	}
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) {
		return true
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return strings.HasPrefix(pe.Code, "08") || pe.Code == "57P01" || pe.Code == "57P02" || pe.Code == "57P03"
	}
	// A connection cut under a query: a network error, or the stream ending mid-message.
	var oe *net.OpError
	return errors.As(err, &oe) || errors.Is(err, io.ErrUnexpectedEOF) || pgconn.SafeToRetry(err)
}
