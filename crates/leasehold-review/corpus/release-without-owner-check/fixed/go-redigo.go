// Fixed: the release script deletes KEYS[1] only when it still holds ARGV[1], this lease's token.
// (Companion of bad/go-redigo.go: a const release script that deletes unconditionally.)
// Acquire is SET NX PX with a per-acquire UUID.
package cron

import (
	"errors"

	"github.com/gomodule/redigo/redis"
	"github.com/google/uuid"
)

const releaseSrc = `if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end`

var release = redis.NewScript(1, releaseSrc)

type Lease struct {
	pool  *redis.Pool
	key   string
	token string
}

func Acquire(pool *redis.Pool, name string) (*Lease, error) {
	conn := pool.Get()
	defer conn.Close()
	l := &Lease{pool: pool, key: "lock:cron:" + name, token: uuid.NewString()}
	_, err := redis.String(conn.Do("SET", l.key, l.token, "NX", "PX", 60000))
	if errors.Is(err, redis.ErrNil) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return l, nil
}

func (l *Lease) Release() error {
	conn := l.pool.Get()
	defer conn.Close()
	_, err := release.Do(conn, l.key, l.token)
	return err
}
