# Reproduces: a Redis outage around the acquire logged and swallowed, after which the guarded
# settlement runs anyway: while Redis is down every worker runs it at once, exactly when the
# lock was needed (fail-open locking).
import logging
import uuid

import redis

log = logging.getLogger("settlement")
r = redis.Redis()
RELEASE = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end"
KEY = "lock:settlement"


def run_settlement(settle) -> None:
    token = uuid.uuid4().hex
    try:
        if not r.set(KEY, token, nx=True, px=120_000):
            return
    except redis.exceptions.RedisError:  # expect: fail-open
        log.warning("redis unavailable, running settlement without lock")
    try:
        settle()
    finally:
        r.eval(RELEASE, 1, KEY, token)
