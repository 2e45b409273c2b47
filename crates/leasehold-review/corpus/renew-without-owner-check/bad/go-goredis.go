// Reproduces: a watchdog goroutine that extends the lock with a bare PEXPIRE (after a stall longer than the
// lease another worker holds the key, and this watchdog keeps its lock alive for it), the
// unchecked-extend kind the Redlock "extend" guidance warns about.
package worker

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

const lease = 20 * time.Second

// keepAlive extends the lock every lease/3 until ctx is cancelled.
func keepAlive(ctx context.Context, rdb *redis.Client, key string) {
	t := time.NewTicker(lease / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			rdb.PExpire(ctx, key, lease) // expect: renew-without-owner-check
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
