# Reproduces: pg_try_advisory_lock run with execute(), whose return value is only the status
# string, so the boolean "got the lock" is never fetched: two schedulers both refresh the views,
# each believing it holds the advisory lock.
import asyncpg

VIEWS_LOCK_ID = 7_310_001


async def refresh_views(dsn: str, refresh) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute("SELECT pg_try_advisory_lock($1)", VIEWS_LOCK_ID)  # expect: unchecked-acquire
        try:
            await refresh(conn)
        finally:
            await conn.execute("SELECT pg_advisory_unlock($1)", VIEWS_LOCK_ID)
    finally:
        await conn.close()
