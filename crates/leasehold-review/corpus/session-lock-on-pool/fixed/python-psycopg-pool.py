# Fixed: the transaction-scoped pg_advisory_xact_lock inside one pool.connection() transaction:
# the lock is released by COMMIT/ROLLBACK on the same connection, never left on a pooled session.
from psycopg_pool import ConnectionPool

pool = ConnectionPool("dbname=app", min_size=2, max_size=10)

LEDGER_LOCK = 41_007


def close_month(close) -> None:
    with pool.connection() as conn:
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (LEDGER_LOCK,))
            close(conn)
