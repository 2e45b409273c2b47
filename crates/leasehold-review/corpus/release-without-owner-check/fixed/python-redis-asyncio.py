# Fixed: the comparison and the DEL run in one Lua script on the server, so no other client's
# command can fall between them.
import secrets

import redis.asyncio as aioredis

r = aioredis.from_url("redis://localhost:6379/0")

RELEASE = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end"


async def acquire(key: str, ttl_ms: int) -> str | None:
    token = secrets.token_hex(16)
    if await r.set(key, token, nx=True, px=ttl_ms):
        return token
    return None


async def release(key: str, token: str) -> bool:
    return await r.eval(RELEASE, 1, key, token) == 1


async def send_digest(user_id: int, send) -> None:
    key = f"lock:digest:{user_id}"
    token = await acquire(key, 20_000)
    if token is None:
        return
    try:
        await send(user_id)
    finally:
        await release(key, token)
