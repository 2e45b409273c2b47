// Reproduces: a Redis lock guarding an HTTP POST to a payment provider with no idempotency key (a worker whose
// lease expired mid-request retries, another worker also sends, and the customer is refunded twice), the
// fencing/idempotency argument of Kleppmann's "How to do distributed locking".
package refunds

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/gomodule/redigo/redis"
	"github.com/google/uuid"
)

var unlock = redis.NewScript(1, `if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end`)

func IssueRefund(ctx context.Context, pool *redis.Pool, client *http.Client, refundID string, body []byte) error {
	conn := pool.Get()
	defer conn.Close()
	key := "lock:refund:" + refundID
	token := uuid.NewString()
	if _, err := redis.String(conn.Do("SET", key, token, "NX", "PX", 30000)); err != nil { // expect: unfenced-effect
		if errors.Is(err, redis.ErrNil) {
			return nil
		}
		return err
	}
	defer unlock.Do(conn, key, token)

	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "https://payments.example.com/v1/refunds", bytes.NewReader(body))
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		return fmt.Errorf("refund %s: %s", refundID, resp.Status)
	}
	return nil
}
