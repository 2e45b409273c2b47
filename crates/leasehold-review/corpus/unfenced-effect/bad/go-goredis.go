// Reproduces: a Redis lock guarding a stock decrement in PostgreSQL with no fencing token (a worker stalled past
// its lease writes after the next holder did), the fencing-token argument of Kleppmann's
// "How to do distributed locking".
package stock

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
)

var release = redis.NewScript(`if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end`)

func Reserve(ctx context.Context, rdb *redis.Client, db *sql.DB, sku string, qty int) (reserved bool, err error) {
	key := "lock:sku:" + sku
	token := uuid.NewString()
	ok, err := rdb.SetNX(ctx, key, token, 10*time.Second).Result() // expect: unfenced-effect
	if err != nil {
		return false, fmt.Errorf("acquire %s: %w", key, err)
	}
	if !ok {
		return false, nil
	}
	defer func() {
		if rerr := release.Run(context.Background(), rdb, []string{key}, token).Err(); rerr != nil && err == nil {
			err = rerr
		}
	}()
	var onHand int
	if err := db.QueryRowContext(ctx, `SELECT on_hand FROM stock WHERE sku = $1`, sku).Scan(&onHand); err != nil {
		return false, err
	}
	if onHand < qty {
		return false, nil
	}
	_, err = db.ExecContext(ctx, `UPDATE stock SET on_hand = $1 WHERE sku = $2`, onHand-qty, sku)
	return err == nil, err
}
