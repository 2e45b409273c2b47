# Reproduces: a Redlock-style quorum whose per-instance acquire reads a timeout as "not acquired"
# and whose caller never cleans up: a SET that timed out but landed leaves that instance locked
# by nobody until the TTL, and a quorum lost that way blocks every worker meanwhile.
import secrets

import redis

INSTANCES = [redis.Redis(port=p, socket_timeout=0.05) for p in (7001, 7002, 7003)]


def lock_instance(r, key, token, ttl_ms):
    try:
        return bool(r.set(key, token, nx=True, px=ttl_ms))
    except redis.RedisError:  # expect: timeout-misread
        return False


def lock(key, ttl_ms=10_000):
    token = secrets.token_hex(16)
    votes = sum(lock_instance(r, key, token, ttl_ms) for r in INSTANCES)
    if votes >= 2:
        return token
    return None
