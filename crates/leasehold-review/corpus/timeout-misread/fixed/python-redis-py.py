# Fixed: on a timeout the outcome of SET NX is unknown, so the helper runs the owner-checked
# release with its own token (removing the lock if the SET did land) before reporting failure.
import logging
import uuid

import redis

log = logging.getLogger(__name__)
r = redis.Redis(socket_timeout=0.25)
RELEASE = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end"


def release(key: str, token: str) -> None:
    r.eval(RELEASE, 1, key, token)


def try_lock(key: str, token: str, ttl_ms: int = 60_000) -> bool:
    try:
        return bool(r.set(key, token, nx=True, px=ttl_ms))
    except redis.exceptions.TimeoutError:
        release(key, token)
        return False


def sync_customer(customer_id: int, sync) -> bool:
    key, token = f"lock:crm-sync:{customer_id}", uuid.uuid4().hex
    if not try_lock(key, token):
        log.info("crm sync for %s not started", customer_id)
        return False
    try:
        sync(customer_id)
    finally:
        release(key, token)
    return True
