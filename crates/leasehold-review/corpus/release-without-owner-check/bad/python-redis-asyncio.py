# Reproduces: release by GET, compare in Python, then DEL as a second command: between the GET
# and the DEL the lease can expire and another worker acquire, and this DEL removes its lock
# (the check-then-act race the redis.io locking page says to close with a Lua script).
import secrets

import redis.asyncio as aioredis

r = aioredis.from_url("redis://localhost:6379/0")


async def acquire(key: str, ttl_ms: int) -> str | None:
    token = secrets.token_hex(16)
    if await r.set(key, token, nx=True, px=ttl_ms):
        return token
    return None


async def release(key: str, token: str) -> bool:
    current = await r.get(key)
    if current is not None and current.decode() == token:
        await r.delete(key)  # expect: release-without-owner-check
        return True
    return False


async def send_digest(user_id: int, send) -> None:
    key = f"lock:digest:{user_id}"
    token = await acquire(key, 20_000)
    if token is None:
        return
    try:
        await send(user_id)
    finally:
        await release(key, token)
