# Reproduces: a Lua "release" script that checks only that the key exists before DEL, so a
# holder whose lease expired mid-work deletes the lock the next holder just took (holder A
# expires, B acquires, A's release removes B's lock; redis.io: "remove the lock only if it's ours").
import uuid

import redis

r = redis.Redis()

RELEASE = (
    "if redis.call('exists', KEYS[1]) == 1 then "  # expect: release-without-owner-check
    "return redis.call('del', KEYS[1]) end return 0"
)
release_script = r.register_script(RELEASE)


class LeaseLock:
    def __init__(self, name: str, ttl_ms: int = 15_000):
        self.key = f"lock:{name}"
        self.ttl_ms = ttl_ms
        self.token = uuid.uuid4().hex

    def __enter__(self):
        if not r.set(self.key, self.token, nx=True, px=self.ttl_ms):
            raise RuntimeError(f"{self.key} is held by another worker")
        return self

    def __exit__(self, *exc):
        release_script(keys=[self.key])
        return False


def logout(session_id: str) -> None:
    # Deleting a session entry, not a lock key.
    r.delete(f"session:{session_id}")


def compact_shard(shard: int, compact) -> None:
    with LeaseLock(f"compact:{shard}"):
        compact(shard)
