# Reproduces: a thin client wrapper that passes SET's flags through, used by a job with nx=True and
# no expiry: if the job dies before its release, the key stays forever and the job never runs again.
import secrets

import redis


class Store:
    def __init__(self):
        self.r = redis.Redis()

    def put(self, name, value, nx=False, px=None):
        return self.r.set(name, value, nx=nx, px=px)


def nightly(store: Store, run):
    token = secrets.token_hex(16)
    if not store.r.set("lock:nightly", token, nx=True):  # expect: nx-without-expiry
        return
    run()
