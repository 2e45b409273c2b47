// Reproduces: renewing with SET key token XX PX (XX only checks that the key exists, not whose it is: after
// the lease lapsed and another holder took the key, this overwrites that holder's value with ours and
// both believe they hold the lock), the unchecked-extend kind the Redlock "extend" guidance warns about.
package scheduler

import (
	"github.com/gomodule/redigo/redis"
)

type Lock struct {
	pool    *redis.Pool
	key     string
	token   string
	leaseMs int
}

// Refresh pushes the lock's expiry out by another lease.
func (l *Lock) Refresh() (bool, error) {
	conn := l.pool.Get()
	defer conn.Close()
	reply, err := redis.String(conn.Do("SET", l.key, l.token, "XX", "PX", l.leaseMs)) // expect: renew-without-owner-check
	if err == redis.ErrNil {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return reply == "OK", nil
}
