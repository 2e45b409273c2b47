// Reproduces: pg_try_advisory_lock via pgxpool.Pool.QueryRow and pg_advisory_unlock via pool.Exec (each call
// acquires and returns a pool connection, so the lock is left on a connection the pool keeps; the unlock
// on another one does nothing), the kind the PostgreSQL advisory-lock docs (session locks) warn about.
package outbox

import (
	"context"

	"github.com/jackc/pgx/v5/pgxpool"
)

const outboxLock int64 = 0x6f7574

type Relay struct {
	pool    *pgxpool.Pool
	publish func(context.Context) error
}

func (r *Relay) Drain(ctx context.Context) (bool, error) {
	var got bool
	if err := r.pool.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", outboxLock).Scan(&got); err != nil { // expect: session-lock-on-pool
		return false, err
	}
	if !got {
		return false, nil
	}
	err := r.publish(ctx)
	if _, uerr := r.pool.Exec(context.Background(), "SELECT pg_advisory_unlock($1)", outboxLock); uerr != nil && err == nil { // expect: session-lock-on-pool
		err = uerr
	}
	return true, err
}
