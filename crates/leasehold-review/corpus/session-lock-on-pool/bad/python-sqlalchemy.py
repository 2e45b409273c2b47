# Reproduces: each advisory-lock statement run in its own engine.connect() block: SQLAlchemy's
# QueuePool hands the connection back (still holding the session lock) after the first block,
# and the unlock runs on a different pooled connection.
from sqlalchemy import create_engine, text

engine = create_engine("postgresql+psycopg://app@db/app", pool_size=5)


def try_lock(key: int) -> bool:
    with engine.connect() as conn:
        return bool(conn.execute(text("SELECT pg_try_advisory_lock(:k)"), {"k": key}).scalar())  # expect: session-lock-on-pool


def unlock(key: int) -> None:
    with engine.connect() as conn:
        conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": key})  # expect: session-lock-on-pool


def send_reminders(batch_id: int, send) -> None:
    if not try_lock(batch_id):
        return
    try:
        send(batch_id)
    finally:
        unlock(batch_id)
