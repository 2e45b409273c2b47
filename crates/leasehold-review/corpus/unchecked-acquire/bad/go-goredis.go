// Reproduces: SetNX's error checked but its boolean ignored (`.Err() == nil` is true both when the key was
// set and when another worker already holds it, so every worker "acquires"), the "check the SET reply"
// point of the Redis locking pattern.
package ingest

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
)

var release = redis.NewScript(`if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end`)

func IngestPartition(ctx context.Context, rdb *redis.Client, partition int, ingest func(context.Context, int) error) (err error) {
	key := fmt.Sprintf("lock:ingest:%d", partition)
	token := uuid.NewString()
	if err := rdb.SetNX(ctx, key, token, time.Minute).Err(); err == nil { // expect: unchecked-acquire
		defer func() {
			if rerr := release.Run(context.Background(), rdb, []string{key}, token).Err(); rerr != nil && err == nil {
				err = rerr
			}
		}()
		return ingest(ctx, partition)
	} else {
		return fmt.Errorf("acquire %s: %w", key, err)
	}
}
