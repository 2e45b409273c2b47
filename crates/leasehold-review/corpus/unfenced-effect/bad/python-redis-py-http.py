# Reproduces: a lease that "ensures" a subscription is charged once, with the charge sent as a
# plain HTTP POST: if the holder stalls past its TTL and another worker takes over, both POSTs
# reach the billing API and the customer is charged twice (no idempotency key).
import uuid

import redis
import requests

r = redis.Redis()
RELEASE = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end"
BILLING_URL = "https://billing.internal/v1/charges"


def charge_renewal(subscription_id: int, period: str, amount_cents: int) -> bool:
    key = f"lock:renewal:{subscription_id}:{period}"
    owner = uuid.uuid4().hex
    if not r.set(key, owner, nx=True, px=30_000):  # expect: unfenced-effect
        return False
    try:
        resp = requests.post(
            BILLING_URL,
            json={"subscription": subscription_id, "amount": amount_cents},
            timeout=10,
        )
        resp.raise_for_status()
    finally:
        r.eval(RELEASE, 1, key, owner)
    return True
