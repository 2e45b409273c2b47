# Reproduces: a socket timeout on SET NX read as "lock refused": the server may have executed
# the SET before the reply was lost, so the lock is in fact held by this worker, which walks away
# without releasing it, and every other worker is locked out until the TTL runs down.
import logging
import uuid

import redis

log = logging.getLogger(__name__)
r = redis.Redis(socket_timeout=0.25)
RELEASE = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end"


def try_lock(key: str, token: str, ttl_ms: int = 60_000) -> bool:
    try:
        return bool(r.set(key, token, nx=True, px=ttl_ms))
    except redis.exceptions.TimeoutError:  # expect: timeout-misread
        return False


def sync_customer(customer_id: int, sync) -> bool:
    key, token = f"lock:crm-sync:{customer_id}", uuid.uuid4().hex
    if not try_lock(key, token):
        log.info("crm sync for %s already running", customer_id)
        return False
    try:
        sync(customer_id)
    finally:
        r.eval(RELEASE, 1, key, token)
    return True
