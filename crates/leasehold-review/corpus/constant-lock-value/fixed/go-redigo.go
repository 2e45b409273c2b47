// Fixed: TryLock writes a fresh UUID and hands it back; Unlock compares that token.
// (Companion of bad/go-redigo.go: os.Getpid() as the lock value.)
package feeds

import (
	"errors"

	"github.com/gomodule/redigo/redis"
	"github.com/google/uuid"
)

var release = redis.NewScript(1, `if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end`)

type Locker struct {
	pool *redis.Pool
}

// TryLock returns the owner token, or "" when the feed is locked elsewhere.
func (l *Locker) TryLock(feed string) (string, error) {
	conn := l.pool.Get()
	defer conn.Close()
	token := uuid.NewString()
	_, err := redis.String(conn.Do("SET", "lock:feed:"+feed, token, "NX", "EX", 30))
	if errors.Is(err, redis.ErrNil) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return token, nil
}

func (l *Locker) Unlock(feed, token string) error {
	conn := l.pool.Get()
	defer conn.Close()
	_, err := release.Do(conn, "lock:feed:"+feed, token)
	return err
}
