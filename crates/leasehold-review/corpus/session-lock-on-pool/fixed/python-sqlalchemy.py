# Fixed: one engine.connect() block holds a single connection for lock, work and unlock.
from sqlalchemy import create_engine, text

engine = create_engine("postgresql+psycopg://app@db/app", pool_size=5)


def send_reminders(batch_id: int, send) -> bool:
    with engine.connect() as conn:
        locked = conn.execute(text("SELECT pg_try_advisory_lock(:k)"), {"k": batch_id}).scalar()
        if not locked:
            return False
        try:
            send(batch_id)
        finally:
            conn.execute(text("SELECT pg_advisory_unlock(:k)"), {"k": batch_id})
    return True
