// Fixed: the POST carries an Idempotency-Key derived from the refund, so a late or repeated request from a
// holder whose lease expired is deduplicated by the provider. (Companion of bad/go-redigo.go.)
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

func IssueRefund(ctx context.Context, pool *redis.Pool, client *http.Client, refundID string, body []byte) (err error) {
	conn := pool.Get()
	defer conn.Close()
	key := "lock:refund:" + refundID
	token := uuid.NewString()
	if _, err := redis.String(conn.Do("SET", key, token, "NX", "PX", 30000)); err != nil {
		if errors.Is(err, redis.ErrNil) {
			return nil
		}
		return err
	}
	defer func() {
		if _, uerr := unlock.Do(conn, key, token); uerr != nil && err == nil {
			err = uerr
		}
	}()

	idempotencyKey := "refund-" + refundID
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "https://payments.example.com/v1/refunds", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Idempotency-Key", idempotencyKey)
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
