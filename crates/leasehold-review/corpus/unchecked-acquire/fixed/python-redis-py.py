# Fixed: redis-py's Lock (SET NX PX plus a token-checking Lua release) with a bounded
# blocking_timeout, and acquire()'s result decides whether the rollup runs.
import redis

r = redis.Redis()


def nightly_rollup(day: str, rollup) -> bool:
    lock = r.lock(f"lock:rollup:{day}", timeout=600, blocking_timeout=5)
    if not lock.acquire():
        return False
    try:
        rollup(day)
    finally:
        lock.release()
    return True


def seen_before(event_id: str, seen: dict) -> bool:
    # dict.setdefault is not a lock.
    return seen.setdefault(event_id, True) is not True
