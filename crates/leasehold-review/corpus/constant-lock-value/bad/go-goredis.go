// Reproduces: os.Hostname() as the lock value, passed through a variable (two goroutines on one host, or two
// pods with the same hostname after a StatefulSet restart, write the same value, so the owner-checked
// release of one frees the other's lock), the "value must be unique per acquire" point of the Redis locking pattern.
package replicator

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/redis/go-redis/v9"
)

var unlock = redis.NewScript(`if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end`)

func ReplicateTable(ctx context.Context, rdb *redis.Client, table string, copyFn func(context.Context) error) (err error) {
	owner, err := os.Hostname()
	if err != nil {
		return err
	}
	key := "lock:replicate:" + table
	ok, err := rdb.SetNX(ctx, key, owner, 2*time.Minute).Result() // expect: constant-lock-value
	if err != nil {
		return fmt.Errorf("acquire %s: %w", key, err)
	}
	if !ok {
		return nil
	}
	defer func() {
		if rerr := unlock.Run(context.Background(), rdb, []string{key}, owner).Err(); rerr != nil && err == nil {
			err = rerr
		}
	}()
	return copyFn(ctx)
}
