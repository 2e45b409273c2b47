# Not a bug: a dedupe marker for redelivered events. SET NX EX with the constant 1, never
# deleted, renewed or read: the first delivery wins and the marker expires after a day, so every
# worker may write the same value.
import redis

r = redis.Redis()


def first_delivery(event_id: str) -> bool:
    return bool(r.set(f"seen:payment-event:{event_id}", 1, nx=True, ex=86_400))


def handle(event: dict, apply) -> None:
    if not first_delivery(event["id"]):
        return
    apply(event)
