// Fixed: the deferred release runs a compare-and-delete Lua script with this acquire's token, so a worker
// whose lease expired cannot delete its successor's lock. (Companion of bad/go-goredis.go.)
// forceRelease is a deliberate operator tool: not a finding.
package media

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
)

var releaseScript = redis.NewScript(`if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end`)

type Transcoder struct {
	rdb    *redis.Client
	encode func(ctx context.Context, videoID string) error
}

func (t *Transcoder) Transcode(ctx context.Context, videoID string) (err error) {
	key := "lock:transcode:" + videoID
	token := uuid.NewString()
	ok, err := t.rdb.SetNX(ctx, key, token, 30*time.Second).Result()
	if err != nil {
		return fmt.Errorf("acquire %s: %w", key, err)
	}
	if !ok {
		return nil
	}
	defer func() {
		if rerr := releaseScript.Run(context.Background(), t.rdb, []string{key}, token).Err(); rerr != nil && err == nil {
			err = fmt.Errorf("release %s: %w", key, rerr)
		}
	}()

	if err := t.encode(ctx, videoID); err != nil {
		return err
	}
	// Not a lock: drop the cached manifest so players refetch it.
	return t.rdb.Del(ctx, "cache:manifest:"+videoID).Err()
}

// forceRelease breaks a stuck transcode lock from the admin CLI.
func (t *Transcoder) forceRelease(ctx context.Context, videoID string) error {
	return t.rdb.Del(ctx, "lock:transcode:"+videoID).Err()
}
