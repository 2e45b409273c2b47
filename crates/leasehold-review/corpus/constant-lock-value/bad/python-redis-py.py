# Reproduces: the lock value is the host name, stored in the constructor: every worker process
# and thread on the same host writes the same value, so the owner-checking release of one worker
# deletes a lock another worker on that host now holds after a lease expiry.
import socket

import redis

RELEASE = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end"


class HostLock:
    def __init__(self, client: redis.Redis, name: str, ttl: int = 30):
        self.client = client
        self.key = f"lock:{name}"
        self.ttl = ttl
        self.value = socket.gethostname()

    def acquire(self) -> bool:
        return bool(self.client.set(self.key, self.value, nx=True, ex=self.ttl))  # expect: constant-lock-value

    def release(self) -> None:
        self.client.eval(RELEASE, 1, self.key, self.value)


def settle_payouts(client: redis.Redis, settle) -> None:
    lock = HostLock(client, "payout-settlement")
    if not lock.acquire():
        return
    try:
        settle()
    finally:
        lock.release()
