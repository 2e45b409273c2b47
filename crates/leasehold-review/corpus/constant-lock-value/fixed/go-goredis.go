// Fixed: the lock value is a fresh UUID per acquire (the host name is only logged), so the owner-checked
// release frees only this call's lock. (Companion of bad/go-goredis.go: os.Hostname() as the value.)
package replicator

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
)

var unlock = redis.NewScript(`if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end`)

func ReplicateTable(ctx context.Context, rdb *redis.Client, table string, copyFn func(context.Context) error) (err error) {
	host, err := os.Hostname()
	if err != nil {
		host = "unknown-host"
	}
	token := uuid.NewString()
	key := "lock:replicate:" + table
	ok, err := rdb.SetNX(ctx, key, token, 2*time.Minute).Result()
	if err != nil {
		return fmt.Errorf("acquire %s: %w", key, err)
	}
	if !ok {
		return nil
	}
	log.Printf("replicating %s on %s (lock token %s)", table, host, token)
	defer func() {
		if rerr := unlock.Run(context.Background(), rdb, []string{key}, token).Err(); rerr != nil && err == nil {
			err = rerr
		}
	}()
	return copyFn(ctx)
}
