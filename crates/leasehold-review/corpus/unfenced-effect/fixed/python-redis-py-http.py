# Fixed: the POST carries an idempotency key derived from the subscription and period, so the
# billing API applies the charge once even if two holders both send it.
import uuid

import redis
import requests

r = redis.Redis()
RELEASE = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end"
BILLING_URL = "https://billing.internal/v1/charges"


def charge_renewal(subscription_id: int, period: str, amount_cents: int) -> bool:
    key = f"lock:renewal:{subscription_id}:{period}"
    owner = uuid.uuid4().hex
    if not r.set(key, owner, nx=True, px=30_000):
        return False
    idempotency_key = f"renewal-{subscription_id}-{period}"
    try:
        resp = requests.post(
            BILLING_URL,
            json={"subscription": subscription_id, "amount": amount_cents},
            headers={"Idempotency-Key": idempotency_key},
            timeout=10,
        )
        resp.raise_for_status()
    finally:
        r.eval(RELEASE, 1, key, owner)
    return True
