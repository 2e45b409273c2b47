# Fixed: after acquiring, the holder takes a monotonically increasing fence from INCR and the
# UPDATE only applies if no later holder has already written (fence check in the WHERE clause).
import psycopg
import redis

r = redis.Redis()


class StaleLeaseError(Exception):
    pass


def apply_interest(conn: psycopg.Connection, account_id: int, rate: float) -> None:
    with r.lock(f"lock:account:{account_id}", timeout=30, blocking_timeout=5):
        fence = r.incr(f"fence:account:{account_id}")
        with conn.cursor() as cur:
            cur.execute("SELECT balance FROM accounts WHERE id = %s", (account_id,))
            (balance,) = cur.fetchone()
            cur.execute(
                "UPDATE accounts SET balance = %s, fence = %s WHERE id = %s AND fence < %s",
                (balance * (1 + rate), fence, account_id, fence),
            )
            if cur.rowcount == 0:
                conn.rollback()
                raise StaleLeaseError(account_id)
        conn.commit()
