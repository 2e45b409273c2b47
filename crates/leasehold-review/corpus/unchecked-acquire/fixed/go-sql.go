// Fixed: the try-lock's boolean is scanned and the rollup is skipped when it is false; lock and unlock both
// go through the same dedicated *sql.Conn. (Companion of bad/go-sql.go.)
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

	var locked bool
	if err := conn.QueryRowContext(ctx, "SELECT pg_try_advisory_lock($1)", rollupLockID).Scan(&locked); err != nil {
		return fmt.Errorf("advisory lock: %w", err)
	}
	if !locked {
		return nil
	}
	defer func() {
		var unlocked bool
		if uerr := conn.QueryRowContext(context.Background(), "SELECT pg_advisory_unlock($1)", rollupLockID).Scan(&unlocked); uerr != nil && err == nil {
			err = uerr
		}
	}()
	return rollup(ctx)
}
