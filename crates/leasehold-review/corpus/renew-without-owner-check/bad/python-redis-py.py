# Reproduces: a heartbeat thread that extends the lock with a bare PEXPIRE: once this worker's
# lease has lapsed and another worker holds the key, the heartbeat keeps extending the OTHER
# worker's lock (and cannot notice that this worker lost it).
import threading
import uuid

import redis

r = redis.Redis()
RELEASE = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end"


class Heartbeat(threading.Thread):
    def __init__(self, key: str, ttl_ms: int):
        super().__init__(daemon=True)
        self.key, self.ttl_ms = key, ttl_ms
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.wait(self.ttl_ms / 3000):
            r.pexpire(self.key, self.ttl_ms)  # expect: renew-without-owner-check


def count_request(client_ip: str) -> int:
    # Rate-limit counter window: an EXPIRE that is not a lock renewal.
    rate_key = f"rate:{client_ip}"
    hits = r.incr(rate_key)
    r.expire(rate_key, 60)
    return hits


def run_migration(name: str, migrate) -> bool:
    key, token = f"lock:migration:{name}", uuid.uuid4().hex
    if not r.set(key, token, nx=True, px=30_000):
        return False
    beat = Heartbeat(key, 30_000)
    beat.start()
    try:
        migrate()
    finally:
        beat.stopped.set()
        r.eval(RELEASE, 1, key, token)
    return True
