# Fixed: a store error is logged and re-raised, so the settlement does not run without the lock
# (the scheduler retries the whole job later).
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
    except redis.exceptions.RedisError:
        log.exception("cannot take %s; settlement not run", KEY)
        raise
    try:
        settle()
    finally:
        r.eval(RELEASE, 1, KEY, token)
