# Fixed: each acquire generates its own random owner value and passes it to the release.
import secrets
from concurrent.futures import ThreadPoolExecutor

import redis

r = redis.Redis()
RELEASE = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end"


def process_account(account_id: int, handler) -> bool:
    key = f"lock:account:{account_id}"
    owner = secrets.token_urlsafe(16)
    if not r.set(key, owner, nx=True, px=10_000):
        return False
    try:
        handler(account_id)
    finally:
        r.eval(RELEASE, 1, key, owner)
    return True


def process_all(account_ids, handler) -> None:
    with ThreadPoolExecutor(max_workers=8) as pool:
        for account_id in account_ids:
            pool.submit(process_account, account_id, handler)
