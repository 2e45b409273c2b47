// Fixed: while holding the lock the worker takes a fence from INCR and the UPDATE applies only if that fence
// is newer than the one stored with the row. (Companion of bad/go-goredis.go: no fence on the UPDATE.)
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
	ok, err := rdb.SetNX(ctx, key, token, 10*time.Second).Result()
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
	fence, err := rdb.Incr(ctx, "fence:sku:"+sku).Result()
	if err != nil {
		return false, err
	}
	res, err := db.ExecContext(ctx,
		`UPDATE stock SET on_hand = on_hand - $1, fence = $2 WHERE sku = $3 AND on_hand >= $1 AND fence < $2`,
		qty, fence, sku)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	return n == 1, err
}
