// Reproduces: go-redis SetNX with expiration 0, which sends SET NX with no TTL (a worker that crashes or
// is OOM-killed while holding the lock leaves the key forever), the "lock without a lease" kind the
// Redis distributed-locks page warns about.
package billing

import (
	"context"
	"fmt"

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
	ok, err := r.rdb.SetNX(ctx, key, token, 0).Result() // expect: nx-without-expiry
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
	return run(ctx)
}
