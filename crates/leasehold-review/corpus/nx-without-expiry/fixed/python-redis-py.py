# Fixed: the lock is taken with SET NX PX in one command, so a crashed holder's key expires on
# its own; the value is a per-acquire random token and release compares it in a Lua script
# (the pattern on redis.io's "Distributed locks with Redis" page).
import uuid

import redis

r = redis.Redis(host="localhost", port=6379)

RELEASE = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end"


def acquire(name: str, ttl_ms: int = 30_000) -> str | None:
    token = uuid.uuid4().hex
    if r.set(f"lock:{name}", token, nx=True, px=ttl_ms):
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
