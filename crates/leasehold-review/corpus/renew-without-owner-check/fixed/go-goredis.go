// Fixed: the watchdog extends with a Lua script that PEXPIREs only while the key holds this worker's token,
// and reports the lease lost (cancelling the work) when it does not. (Companion of bad/go-goredis.go.)
// The rate limiter's EXPIRE is not a lock renewal.
package worker

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

const lease = 20 * time.Second

var extendScript = redis.NewScript(`if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) else return 0 end`)

// keepAlive extends the lock every lease/3 until ctx is cancelled; it calls lost when the lease is gone.
func keepAlive(ctx context.Context, rdb *redis.Client, key, token string, lost context.CancelFunc) {
	t := time.NewTicker(lease / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			n, err := extendScript.Run(ctx, rdb, []string{key}, token, lease.Milliseconds()).Int()
			if err != nil || n != 1 {
				lost()
				return
			}
		}
	}
}

// allow is a fixed-window rate limiter: not a lock.
func allow(ctx context.Context, rdb *redis.Client, client string) (bool, error) {
	key := "ratelimit:" + client
	n, err := rdb.Incr(ctx, key).Result()
	if err != nil {
		return false, err
	}
	if n == 1 {
		if err := rdb.Expire(ctx, key, time.Minute).Err(); err != nil {
			return false, err
		}
	}
	return n <= 100, nil
}
