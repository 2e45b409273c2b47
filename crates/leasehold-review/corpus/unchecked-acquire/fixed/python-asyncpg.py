# Fixed: the boolean from pg_try_advisory_lock is fetched with fetchval and checked; lock and
# unlock run on the same dedicated connection.
import asyncpg

VIEWS_LOCK_ID = 7_310_001


async def refresh_views(dsn: str, refresh) -> bool:
    conn = await asyncpg.connect(dsn)
    try:
        locked = await conn.fetchval("SELECT pg_try_advisory_lock($1)", VIEWS_LOCK_ID)
        if not locked:
            return False
        try:
            await refresh(conn)
        finally:
            await conn.execute("SELECT pg_advisory_unlock($1)", VIEWS_LOCK_ID)
        return True
    finally:
        await conn.close()
