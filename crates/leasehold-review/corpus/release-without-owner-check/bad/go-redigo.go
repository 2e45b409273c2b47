// Reproduces: a release script in a Go const that DELs KEYS[1] without comparing the owner token
// (a holder whose lease expired still deletes the next holder's lock: atomic, but not owner-checked),
// the unconditional-release kind the Redis distributed-locks page warns about.
package cron

import (
	"errors"

	"github.com/gomodule/redigo/redis"
	"github.com/google/uuid"
)

const releaseSrc = `redis.call('del', KEYS[1]) return 1` // expect: release-without-owner-check

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
