# Fixed: SET NX EX in one command (no window without an expiry), a random token per lock object,
# and a release that deletes the key only while it still holds this object's token.
import time
import uuid

import redis

RELEASE = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end"


class ReportLock:
    def __init__(self, client: redis.Redis, name: str, ttl: int = 60):
        self.client = client
        self.key = f"lock:report:{name}"
        self.ttl = ttl
        self.token = uuid.uuid4().hex
        self._release = client.register_script(RELEASE)

    def acquire(self) -> bool:
        return bool(self.client.set(self.key, self.token, nx=True, ex=self.ttl))

    def release(self) -> None:
        self._release(keys=[self.key], args=[self.token])


def generate_daily_report(client: redis.Redis, render) -> None:
    lock = ReportLock(client, time.strftime("%Y-%m-%d"))
    if not lock.acquire():
        return
    try:
        render()
    finally:
        lock.release()
