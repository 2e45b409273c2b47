# Reproduces: a thin client wrapper that passes SET's flags through; fixed: the job's acquire sets
# the expiry in the same command, and the wrapper's own nx=nx is a flag passed on, not a lock.
import secrets

import redis


class Store:
    def __init__(self):
        self.r = redis.Redis()

    def put(self, name, value, nx=False, px=None):
        return self.r.set(name, value, nx=nx, px=px)


def nightly(store: Store, run):
    token = secrets.token_hex(16)
    if not store.r.set("lock:nightly", token, nx=True, px=600_000):
        return
    run()
