// Reproduces: the process id as the lock value (every goroutine of the process shares it, and pid 1 is the
// same in every container), so the owner check cannot tell holders apart, the "value must be unique
// per acquire" point of the Redis locking pattern.
package feeds

import (
	"errors"
	"os"
	"strconv"

	"github.com/gomodule/redigo/redis"
)

var release = redis.NewScript(1, `if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end`)

type Locker struct {
	pool *redis.Pool
	self string
}

func NewLocker(pool *redis.Pool) *Locker {
	return &Locker{pool: pool, self: strconv.Itoa(os.Getpid())}
}

func (l *Locker) TryLock(feed string) (bool, error) {
	conn := l.pool.Get()
	defer conn.Close()
	_, err := redis.String(conn.Do("SET", "lock:feed:"+feed, l.self, "NX", "EX", 30)) // expect: constant-lock-value
	if errors.Is(err, redis.ErrNil) {
		return false, nil
	}
	return err == nil, err
}

func (l *Locker) Unlock(feed string) error {
	conn := l.pool.Get()
	defer conn.Close()
	_, err := release.Do(conn, "lock:feed:"+feed, l.self)
	return err
}
