// Reproduces: pg_try_advisory_lock run with ExecContext on a dedicated connection, so its boolean is thrown
// away (when another instance holds the lock the function returns false and the rollup runs anyway),
// the unread try-lock kind the PostgreSQL advisory-lock docs imply.
package rollup

import (
	"context"
	"database/sql"
	"fmt"
)

const rollupLockID = 7001

func RunRollup(ctx context.Context, db *sql.DB, rollup func(context.Context) error) (err error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()

	if _, err := conn.ExecContext(ctx, "SELECT pg_try_advisory_lock($1)", rollupLockID); err != nil { // expect: unchecked-acquire
		return fmt.Errorf("advisory lock: %w", err)
	}
	defer func() {
		if _, uerr := conn.ExecContext(context.Background(), "SELECT pg_advisory_unlock($1)", rollupLockID); uerr != nil && err == nil {
			err = uerr
		}
	}()
	return rollup(ctx)
}
