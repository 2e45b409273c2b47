// Fixed: SetNX with a non-zero expiration sends SET key token NX PX in one command, so a crashed worker's
// lock expires. (Companion of bad/go-goredis.go: SetNX with expiration 0.)
// The value is a per-acquire UUID and the release compares it in Lua.
package billing

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
)

var releaseScript = redis.NewScript(`if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end`)

type InvoiceRunner struct {
	rdb *redis.Client
}

func (r *InvoiceRunner) RunMonth(ctx context.Context, month string, run func(context.Context) error) (err error) {
	key := "lock:invoices:" + month
	token := uuid.NewString()
	ok, err := r.rdb.SetNX(ctx, key, token, 10*time.Minute).Result()
	if err != nil {
		return fmt.Errorf("acquire %s: %w", key, err)
	}
	if !ok {
		return nil // another worker is on it
	}
	defer func() {
		if _, rerr := releaseScript.Run(context.Background(), r.rdb, []string{key}, token).Result(); rerr != nil && err == nil {
			err = fmt.Errorf("release %s: %w", key, rerr)
		}
	}()
	// A cache write, not a lock: plain SET with a TTL.
	if err := r.rdb.Set(ctx, "cache:invoices:last-run", month, time.Hour).Err(); err != nil {
		return err
	}
	return run(ctx)
}
