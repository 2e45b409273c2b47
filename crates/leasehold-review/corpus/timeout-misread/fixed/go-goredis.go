// Fixed: an error from SetNX is returned as an error, not as "busy", after a best-effort compare-and-delete
// with this call's token undoes a SET that may have landed. (Companion of bad/go-goredis.go.)
package rebalance

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
)

var release = redis.NewScript(`if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end`)

type Gate struct {
	rdb *redis.Client
}

// TryEnter reports whether this node may rebalance the cluster, and the token to release with.
func (g *Gate) TryEnter(ctx context.Context) (bool, string, error) {
	token := uuid.NewString()
	ok, err := g.rdb.SetNX(ctx, "lock:rebalance", token, 5*time.Minute).Result()
	if err != nil {
		cleanupCtx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if rerr := release.Run(cleanupCtx, g.rdb, []string{"lock:rebalance"}, token).Err(); rerr != nil {
			err = errors.Join(err, rerr)
		}
		return false, "", fmt.Errorf("lock state unknown: %w", err)
	}
	return ok, token, nil
}
