# Reproduces: the lock value is os.getpid() held in a module variable: threads of one process
# share it (a thread pool of workers all "own" the lock), and after a restart in a container the
# pid is often 1 again, so a stale holder's compare-and-delete matches the new holder's value.
import os
from concurrent.futures import ThreadPoolExecutor

import redis

r = redis.Redis()
OWNER = str(os.getpid())
RELEASE = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end"


def process_account(account_id: int, handler) -> bool:
    key = f"lock:account:{account_id}"
    if not r.set(key, OWNER, nx=True, px=10_000):  # expect: constant-lock-value
        return False
    try:
        handler(account_id)
    finally:
        r.eval(RELEASE, 1, key, OWNER)
    return True


def process_all(account_ids, handler) -> None:
    with ThreadPoolExecutor(max_workers=8) as pool:
        for account_id in account_ids:
            pool.submit(process_account, account_id, handler)
