// Reproduces: session-level pg_try_advisory_lock and pg_advisory_unlock sent through *sql.DB, which picks a
// pooled connection per call (the unlock runs on another session and returns false, the lock stays
// held by an idle connection), the kind the PostgreSQL advisory-lock docs (session locks) warn about.
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
	var locked bool
	if err := a.db.QueryRowContext(ctx, "SELECT pg_try_advisory_lock($1)", tenantID).Scan(&locked); err != nil { // expect: session-lock-on-pool
		return fmt.Errorf("lock tenant %d: %w", tenantID, err)
	}
	if !locked {
		return nil
	}
	defer func() {
		if _, uerr := a.db.ExecContext(context.Background(), "SELECT pg_advisory_unlock($1)", tenantID); uerr != nil && err == nil { // expect: session-lock-on-pool
			err = uerr
		}
	}()
	return a.archive(ctx, tenantID)
}
