# Reproduces: pg_try_advisory_lock and pg_advisory_unlock in two separate
# connection_pool.with_connection blocks: the first connection goes back to the pool still
# holding the session lock, and the unlock runs on whichever connection the pool lends next.
class ReconciliationJob < ApplicationJob
  LOCK_ID = 90_417

  def perform(account_id)
    return unless take_lock

    begin
      Reconciler.new(account_id).run
    ensure
      drop_lock
    end
  end

  private

  def take_lock
    ActiveRecord::Base.connection_pool.with_connection do |conn|
      conn.select_value("SELECT pg_try_advisory_lock(#{LOCK_ID})") # expect: session-lock-on-pool
    end
  end

  def drop_lock
    ActiveRecord::Base.connection_pool.with_connection do |conn|
      conn.select_value("SELECT pg_advisory_unlock(#{LOCK_ID})") # expect: session-lock-on-pool
    end
  end
end
