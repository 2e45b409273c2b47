# Fixed: the heartbeat extends through a Lua script that compares the owner token first, and it
# stops (and flags the loss) as soon as the extend reports the lock is no longer ours.
import threading
import uuid

import redis

r = redis.Redis()
RELEASE = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end"
EXTEND = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) else return 0 end"


class Heartbeat(threading.Thread):
    def __init__(self, key: str, token: str, ttl_ms: int):
        super().__init__(daemon=True)
        self.key, self.token, self.ttl_ms = key, token, ttl_ms
        self.stopped, self.lost = threading.Event(), threading.Event()

    def run(self) -> None:
        while not self.stopped.wait(self.ttl_ms / 3000):
            if r.eval(EXTEND, 1, self.key, self.token, self.ttl_ms) != 1:
                self.lost.set()
                return


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
    beat = Heartbeat(key, token, 30_000)
    beat.start()
    try:
        migrate(should_stop=beat.lost.is_set)
    finally:
        beat.stopped.set()
        r.eval(RELEASE, 1, key, token)
    return True
