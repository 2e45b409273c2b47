# Fixed: the value is a random token per lock instance (host name kept only as a readable
# prefix), so two workers on one host can be told apart by the release script.
import socket
import uuid

import redis

RELEASE = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end"


class HostLock:
    def __init__(self, client: redis.Redis, name: str, ttl: int = 30):
        self.client = client
        self.key = f"lock:{name}"
        self.ttl = ttl
        self.value = f"{socket.gethostname()}:{uuid.uuid4().hex}"

    def acquire(self) -> bool:
        return bool(self.client.set(self.key, self.value, nx=True, ex=self.ttl))

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
