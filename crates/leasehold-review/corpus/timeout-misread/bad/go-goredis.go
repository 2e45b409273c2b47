// Reproduces: an error from SetNX (a client timeout) returned as plain "not acquired", with no cleanup (the
// SET may have been applied, so the key blocks every node for the whole lease while this caller thinks
// someone else is working), the ambiguous-timeout point of Kleppmann's lock analysis.
package rebalance

import (
	"context"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"
)

type Gate struct {
	rdb *redis.Client
}

// TryEnter reports whether this node may rebalance the cluster, and the token to release with.
func (g *Gate) TryEnter(ctx context.Context) (bool, string) {
	token := uuid.NewString()
	ok, err := g.rdb.SetNX(ctx, "lock:rebalance", token, 5*time.Minute).Result()
	if err != nil { // expect: timeout-misread
		return false, ""
	}
	return ok, token
}
