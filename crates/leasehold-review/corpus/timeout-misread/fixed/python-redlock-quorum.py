# Reproduces: a Redlock-style quorum whose per-instance acquire reads a timeout as "not acquired";
# fixed: when the quorum is not reached the caller releases on every instance, owner-checked, so a
# SET that timed out but landed is removed at once.
import secrets

import redis

INSTANCES = [redis.Redis(port=p, socket_timeout=0.05) for p in (7001, 7002, 7003)]
RELEASE = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end"


def lock_instance(r, key, token, ttl_ms):
    try:
        return bool(r.set(key, token, nx=True, px=ttl_ms))
    except redis.RedisError:
        return False


def unlock_instance(r, key, token):
    try:
        r.eval(RELEASE, 1, key, token)
    except redis.RedisError:
        pass


def lock(key, ttl_ms=10_000):
    token = secrets.token_hex(16)
    votes = sum(lock_instance(r, key, token, ttl_ms) for r in INSTANCES)
    if votes >= 2:
        return token
    for r in INSTANCES:
        unlock_instance(r, key, token)
    return None
