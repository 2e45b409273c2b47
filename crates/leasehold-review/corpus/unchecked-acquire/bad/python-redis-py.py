# Reproduces: SET NX PX issued as a bare statement and its reply never read: when another worker
# already holds the lock, SET returns None, and this worker runs the rollup anyway, in parallel
# with the holder (and its release then finds a foreign token and does nothing).
import uuid

import redis

r = redis.Redis()
release_script = r.register_script(
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end"
)


def nightly_rollup(day: str, rollup) -> None:
    key = f"lock:rollup:{day}"
    token = uuid.uuid4().hex
    r.set(key, token, nx=True, px=600_000)  # expect: unchecked-acquire
    try:
        rollup(day)
    finally:
        release_script(keys=[key], args=[token])


def seen_before(event_id: str, seen: dict) -> bool:
    # dict.setdefault is not a lock.
    return seen.setdefault(event_id, True) is not True
