// Fixed: one dedicated *sql.Conn from db.Conn(ctx) carries both the lock and the unlock, so they run in the
// same PostgreSQL session. (Companion of bad/go-sql.go: both through *sql.DB.)
package archive

import (
	"context"
	"database/sql"
	"fmt"
)

type Archiver struct {
	db      *sql.DB
	archive func(ctx context.Context, tenantID int64) error
}

func (a *Archiver) ArchiveTenant(ctx context.Context, tenantID int64) (err error) {
	conn, err := a.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()

	var locked bool
	if err := conn.QueryRowContext(ctx, "SELECT pg_try_advisory_lock($1)", tenantID).Scan(&locked); err != nil {
		return fmt.Errorf("lock tenant %d: %w", tenantID, err)
	}
	if !locked {
		return nil
	}
	defer func() {
		var unlocked bool
		if uerr := conn.QueryRowContext(context.Background(), "SELECT pg_advisory_unlock($1)", tenantID).Scan(&unlocked); uerr != nil && err == nil {
			err = uerr
		}
	}()
	return a.archive(ctx, tenantID)
}
