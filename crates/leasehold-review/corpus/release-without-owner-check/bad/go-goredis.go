// Reproduces: a deferred bare DEL of the lock key (worker A's 30 s lease expires during a slow upload,
// worker B acquires, A's deferred Del removes B's lock and worker C gets in too), the unconditional
// release kind the Redis distributed-locks page warns about.
package media

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
)

type Transcoder struct {
	rdb    *redis.Client
	encode func(ctx context.Context, videoID string) error
}

func (t *Transcoder) Transcode(ctx context.Context, videoID string) error {
	key := "lock:transcode:" + videoID
	ok, err := t.rdb.SetNX(ctx, key, uuid.NewString(), 30*time.Second).Result()
	if err != nil {
		return fmt.Errorf("acquire %s: %w", key, err)
	}
	if !ok {
		return nil
	}
	defer t.rdb.Del(context.Background(), key) // expect: release-without-owner-check

	if err := t.encode(ctx, videoID); err != nil {
		return err
	}
	// Not a lock: drop the cached manifest so players refetch it.
	return t.rdb.Del(ctx, "cache:manifest:"+videoID).Err()
}
