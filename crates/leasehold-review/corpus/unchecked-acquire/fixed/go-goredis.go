// Fixed: SetNX's boolean is read with .Result(); false means another worker holds the partition.
// (Companion of bad/go-goredis.go: `.Err() == nil` read as a grant.)
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
	ok, err := rdb.SetNX(ctx, key, token, time.Minute).Result()
	if err != nil {
		return fmt.Errorf("acquire %s: %w", key, err)
	}
	if !ok {
		return nil
	}
	defer func() {
		if rerr := release.Run(context.Background(), rdb, []string{key}, token).Err(); rerr != nil && err == nil {
			err = rerr
		}
	}()
	return ingest(ctx, partition)
}
