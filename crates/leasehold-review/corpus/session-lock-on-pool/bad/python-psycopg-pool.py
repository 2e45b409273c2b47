# Reproduces: pg_advisory_lock and pg_advisory_unlock each in their own `with pool.connection()`
# block of a psycopg_pool ConnectionPool: the lock stays on the first connection after it is
# returned to the pool, and the unlock runs on whatever connection the pool hands out next.
from psycopg_pool import ConnectionPool

pool = ConnectionPool("dbname=app", min_size=2, max_size=10)

LEDGER_LOCK = 41_007


def lock_ledger() -> None:
    with pool.connection() as conn:
        conn.execute("SELECT pg_advisory_lock(%s)", (LEDGER_LOCK,))  # expect: session-lock-on-pool


def unlock_ledger() -> None:
    with pool.connection() as conn:
        conn.execute("SELECT pg_advisory_unlock(%s)", (LEDGER_LOCK,))  # expect: session-lock-on-pool


def close_month(close) -> None:
    lock_ledger()
    try:
        close()
    finally:
        unlock_ledger()
