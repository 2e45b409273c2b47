# Fixed: one with_connection block covers lock, work and unlock, so the same session takes and
# releases the advisory lock before the connection returns to the pool.
class ReconciliationJob < ApplicationJob
  LOCK_ID = 90_417

  def perform(account_id)
    ActiveRecord::Base.connection_pool.with_connection do |conn|
      locked = conn.select_value("SELECT pg_try_advisory_lock(#{LOCK_ID})")
      next unless locked

      begin
        Reconciler.new(account_id).run
      ensure
        conn.select_value("SELECT pg_advisory_unlock(#{LOCK_ID})")
      end
    end
  end
end
