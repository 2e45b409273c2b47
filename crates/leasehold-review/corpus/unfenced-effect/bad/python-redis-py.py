# Reproduces: a correct Redis lease guarding a read-modify-write UPDATE in Postgres with no
# fencing token (Kleppmann, "How to do distributed locking"): a holder paused past its TTL (GC,
# stalled I/O) wakes up and writes a stale balance over the next holder's update.
import psycopg
import redis

r = redis.Redis()


def apply_interest(conn: psycopg.Connection, account_id: int, rate: float) -> None:
    with r.lock(f"lock:account:{account_id}", timeout=30, blocking_timeout=5):  # expect: unfenced-effect
        with conn.cursor() as cur:
            cur.execute("SELECT balance FROM accounts WHERE id = %s", (account_id,))
            (balance,) = cur.fetchone()
            cur.execute(
                "UPDATE accounts SET balance = %s WHERE id = %s",
                (balance * (1 + rate), account_id),
            )
        conn.commit()
