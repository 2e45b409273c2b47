// Fixed: a SetNX error is returned and the digest is not sent without the lock (fail closed).
// (Companion of bad/go-goredis.go: the error logged with no return.)
package digest

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
)

var release = redis.NewScript(`if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end`)

func SendDaily(ctx context.Context, rdb *redis.Client, day string, send func(context.Context) error) error {
	key := "lock:digest:" + day
	token := uuid.NewString()
	ok, err := rdb.SetNX(ctx, key, token, 15*time.Minute).Result()
	if err != nil {
		return fmt.Errorf("acquire %s: %w", key, err)
	}
	if !ok {
		return nil
	}
	sendErr := send(ctx)
	if err := release.Run(context.Background(), rdb, []string{key}, token).Err(); err != nil && sendErr == nil {
		return err
	}
	return sendErr
}
