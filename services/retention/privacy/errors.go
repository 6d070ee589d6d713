package privacy

import (
	"errors"

	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"
)

// Permanent tells whether err, though it came from a database (and is
// ErrUnavailable), will not go away by trying again: the statement was
// refused for what it is, not for the server's state. A missing grant, a
// missing table or column (a migration not applied), a syntax or data
// error. The erasure then fails with the error as its reason instead of
// being retried; everything else a database answers (a connection lost, a
// server shutting down, a lock or statement timeout, a deadlock, too many
// connections, a disk full) is transient.
func Permanent(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && len(pe.Code) == 5 {
		switch pe.Code[:2] {
		case "42", // syntax error or access rule violation: 42501 permission denied, 42P01 undefined table
			"22", // data exception
			"23", // integrity constraint violation
			"0A", // feature not supported
			"2B", // dependent privilege descriptors still exist
			"28", // invalid authorization specification
			"3D", // invalid catalog name (no such database)
			"3F", // invalid schema name
			"44": // with check option violation
			return true
		}
		return false
	}
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		switch me.Number {
		case 1044, // access denied for user to database
			1045, // access denied (bad password)
			1049, // unknown database
			1054, // unknown column
			1064, // syntax error
			1142, // command denied to user on table
			1143, // column access denied
			1146, // table does not exist
			1227, // access denied; needs a privilege
			1370: // execute command denied
			return true
		}
	}
	return false
}
