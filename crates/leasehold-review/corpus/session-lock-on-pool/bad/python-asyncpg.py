# Reproduces: a session-level advisory lock taken and released through an asyncpg Pool: each
# pool.fetchval checks out whichever connection is free, so the unlock usually runs on another
# session (returns false), and the lock stays held by a pooled connection indefinitely.
import asyncpg


class AdvisoryLock:
    def __init__(self, pool: asyncpg.Pool, key: int):
        self.pool = pool
        self.key = key

    async def try_lock(self) -> bool:
        return await self.pool.fetchval("SELECT pg_try_advisory_lock($1)", self.key)  # expect: session-lock-on-pool

    async def unlock(self) -> None:
        await self.pool.fetchval("SELECT pg_advisory_unlock($1)", self.key)  # expect: session-lock-on-pool


async def recompute_scores(pool: asyncpg.Pool, league_id: int, recompute) -> bool:
    lock = AdvisoryLock(pool, league_id)
    if not await lock.try_lock():
        return False
    try:
        await recompute(league_id)
    finally:
        await lock.unlock()
    return True
