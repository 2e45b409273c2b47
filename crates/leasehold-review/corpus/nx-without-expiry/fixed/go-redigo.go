// Fixed: SET key token NX PX ttl in one command, so the mutex expires if its holder dies.
// (Companion of bad/go-redigo.go: SET NX with no expiry.)
// Unlock compares the owner token in Lua.
package redismutex

import (
	"errors"

	"github.com/gomodule/redigo/redis"
	"github.com/google/uuid"
)

var unlockScript = redis.NewScript(1, `if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end`)

type Mutex struct {
	pool  *redis.Pool
	key   string
	ttlMs int64
}

// Lock returns the owner token, or "" when the mutex is held elsewhere.
func (m *Mutex) Lock() (string, error) {
	conn := m.pool.Get()
	defer conn.Close()
	token := uuid.NewString()
	_, err := redis.String(conn.Do("SET", m.key, token, "NX", "PX", m.ttlMs))
	if errors.Is(err, redis.ErrNil) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return token, nil
}

func (m *Mutex) Unlock(token string) error {
	conn := m.pool.Get()
	defer conn.Close()
	_, err := redis.Int(unlockScript.Do(conn, m.key, token))
	return err
}
