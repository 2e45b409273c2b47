// Fixed: a transaction-level pg_try_advisory_xact_lock inside pool.Begin, so the lock lives exactly as long
// as the transaction's single connection and is released by COMMIT/ROLLBACK. (Companion of bad/go-pgxpool.go.)
package outbox

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

const outboxLock int64 = 0x6f7574

type Relay struct {
	pool    *pgxpool.Pool
	publish func(context.Context, pgx.Tx) error
}

func (r *Relay) Drain(ctx context.Context) (bool, error) {
	tx, err := r.pool.Begin(ctx)
	if err != nil {
		return false, err
	}
	defer tx.Rollback(context.Background())

	var got bool
	if err := tx.QueryRow(ctx, "SELECT pg_try_advisory_xact_lock($1)", outboxLock).Scan(&got); err != nil {
		return false, err
	}
	if !got {
		return false, nil
	}
	if err := r.publish(ctx, tx); err != nil {
		return true, err
	}
	return true, tx.Commit(ctx)
}
