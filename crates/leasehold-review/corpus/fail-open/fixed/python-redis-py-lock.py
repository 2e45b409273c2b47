# Fixed: no handler around acquire(): a ConnectionError propagates and the import does not run;
# a False from acquire() (timed out waiting) skips the import.
import redis

r = redis.Redis()


def import_feed(feed_id: int, do_import) -> bool:
    lock = r.lock(f"lock:feed-import:{feed_id}", timeout=300, blocking_timeout=2)
    if not lock.acquire():
        return False
    try:
        do_import(feed_id)
    finally:
        lock.release()
    return True
