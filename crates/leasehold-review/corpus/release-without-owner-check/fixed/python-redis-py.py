# Fixed: the release script compares the stored value with this holder's token before DEL
# (redis.io's reference release script). force_unlock is a deliberate operator API that breaks
# a stuck lock, named as such.
import uuid

import redis

r = redis.Redis()

RELEASE = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end"
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
        release_script(keys=[self.key], args=[self.token])
        return False


def force_unlock(name: str) -> None:
    """Admin command: break a lock left behind by a dead worker."""
    r.delete(f"lock:{name}")


def logout(session_id: str) -> None:
    # Deleting a session entry, not a lock key.
    r.delete(f"session:{session_id}")


def compact_shard(shard: int, compact) -> None:
    with LeaseLock(f"compact:{shard}"):
        compact(shard)
