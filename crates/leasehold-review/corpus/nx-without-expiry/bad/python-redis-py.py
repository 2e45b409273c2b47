# Reproduces: a lock taken with SET NX and no expiry, the hazard the redis.io SETNX/SET pages warn
# about: if the holder crashes or is killed between acquire and release, the key never expires and
# every later run of the job is locked out until someone deletes the key by hand.
import uuid

import redis

r = redis.Redis(host="localhost", port=6379)

RELEASE = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end"


def acquire(name: str) -> str | None:
    token = uuid.uuid4().hex
    if r.set(f"lock:{name}", token, nx=True):  # expect: nx-without-expiry
        return token
    return None


def release(name: str, token: str) -> None:
    r.eval(RELEASE, 1, f"lock:{name}", token)


def cache_index_stats(stats: str) -> None:
    # A plain cache write with a TTL and no NX: not a lock.
    r.set("stats:search-index", stats, ex=60)


def rebuild_search_index(build) -> bool:
    token = acquire("search-index")
    if token is None:
        return False
    try:
        build()
    finally:
        release("search-index", token)
    return True
