# Reproduces: redis-py's Lock used correctly on the happy path, but a ConnectionError from
# acquire() is caught with `pass` and the import then proceeds, unlocked, on every worker.
import redis
from redis.exceptions import ConnectionError as RedisConnectionError

r = redis.Redis()


def import_feed(feed_id: int, do_import) -> None:
    lock = r.lock(f"lock:feed-import:{feed_id}", timeout=300, blocking_timeout=2)
    acquired = False
    try:
        acquired = lock.acquire()
        if not acquired:
            return
    except RedisConnectionError:  # expect: fail-open
        pass
    try:
        do_import(feed_id)
    finally:
        if acquired:
            lock.release()
