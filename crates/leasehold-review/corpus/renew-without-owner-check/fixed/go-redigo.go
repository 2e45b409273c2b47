// Fixed: Refresh runs a Lua script that extends the key only while it still holds this lock's token.
// (Companion of bad/go-redigo.go: SET XX PX as the renewal.)
package scheduler

import (
	"github.com/gomodule/redigo/redis"
)

var refreshScript = redis.NewScript(1, `if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) else return 0 end`)

type Lock struct {
	pool    *redis.Pool
	key     string
	token   string
	leaseMs int
}

// Refresh pushes the lock's expiry out by another lease; false means the lock is no longer ours.
func (l *Lock) Refresh() (bool, error) {
	conn := l.pool.Get()
	defer conn.Close()
	n, err := redis.Int(refreshScript.Do(conn, l.key, l.token, l.leaseMs))
	if err != nil {
		return false, err
	}
	return n == 1, nil
}
