package store

import (
	"errors"
	"io"
	"net"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// ErrConnectTimeout: a connection to PostgreSQL was not made within Config's
// ConnectTimeout. IsUnreachable reports it.
var ErrConnectTimeout = errors.New("store: connect timeout")

// IsUnreachable reports whether err says the store could not be reached: a connection
// to PostgreSQL that could not be made or was lost (the server stopped, restarting,
// its network gone), or the server refusing work while it shuts down or starts up
// (SQLSTATE class 08, 57P01 to 57P03), because all its connections are taken
// (53300), or because the database takes no new connections for now (55000 at
// connect: ALTER DATABASE … ALLOW_CONNECTIONS false, an operator's maintenance). The
// operation may be retried once the database is back; one whose connection was lost
// at its commit may have been carried out.
//
// A server that answered a connection with any other error (a wrong password
// 28P01, a database that does not exist 3D000) is reachable: that is not retried.
func IsUnreachable(err error) bool {
	if err == nil {
		return false
	}
	// Before ConnectError, which wraps whatever made the connection fail, the
	// server's own refusals included.
	var pe *pgconn.PgError
	var ce *pgconn.ConnectError
	if errors.As(err, &pe) {
		if pe.Code == "55000" { // at connect only: a query's 55000 is about its objects
			return errors.As(err, &ce)
		}
		return strings.HasPrefix(pe.Code, "08") || pe.Code == "57P01" || pe.Code == "57P02" || pe.Code == "57P03" || pe.Code == "53300"
	}
	if errors.As(err, &ce) || errors.Is(err, ErrConnectTimeout) {
		return true
	}
	// A connection cut under a query: a network error, or the stream ending mid-message.
	var oe *net.OpError
	return errors.As(err, &oe) || errors.Is(err, io.ErrUnexpectedEOF) || pgconn.SafeToRetry(err)
}
