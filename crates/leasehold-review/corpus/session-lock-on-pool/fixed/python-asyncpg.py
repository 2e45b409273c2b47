# Fixed: one connection is acquired from the pool for the whole critical section and both the
# lock and the unlock run on it, before it goes back to the pool.
import asyncpg


async def recompute_scores(pool: asyncpg.Pool, league_id: int, recompute) -> bool:
    async with pool.acquire() as conn:
        if not await conn.fetchval("SELECT pg_try_advisory_lock($1)", league_id):
            return False
        try:
            await recompute(league_id)
        finally:
            await conn.execute("SELECT pg_advisory_unlock($1)", league_id)
    return True
