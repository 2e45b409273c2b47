# Reproduces: SETNX followed by a separate EXPIRE (the old SETNX locking recipe): a crash between
# the two commands leaves a lock that never expires; the constant value "1" and the bare DEL also
# let a worker whose lease ran out delete the lock another worker now holds.
import time

import redis


class ReportLock:
    def __init__(self, client: redis.Redis, name: str, ttl: int = 60):
        self.client = client
        self.key = f"lock:report:{name}"
        self.ttl = ttl

    def acquire(self) -> bool:
        if self.client.setnx(self.key, "1"):  # expect: nx-without-expiry, constant-lock-value
            self.client.expire(self.key, self.ttl)
            return True
        return False

    def release(self) -> None:
        self.client.delete(self.key)  # expect: release-without-owner-check


def generate_daily_report(client: redis.Redis, render) -> None:
    lock = ReportLock(client, time.strftime("%Y-%m-%d"))
    if not lock.acquire():
        return
    try:
        render()
    finally:
        lock.release()
