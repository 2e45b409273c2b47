# Reproduces: Sequel's DB.get for pg_try_advisory_lock and again for pg_advisory_unlock: each
# DB.get checks a connection out of Sequel's pool for one statement, so under threads the unlock
# can run on another connection and the session lock leaks on a pooled one.
require "sequel"

DB = Sequel.connect(ENV.fetch("DATABASE_URL"), max_connections: 8)

class CampaignSender
  def initialize(campaign_id)
    @campaign_id = campaign_id
  end

  def deliver
    locked = DB.get(Sequel.function(:pg_try_advisory_lock, @campaign_id)) # expect: session-lock-on-pool
    return false unless locked

    begin
      yield @campaign_id
    ensure
      DB.get(Sequel.function(:pg_advisory_unlock, @campaign_id)) # expect: session-lock-on-pool
    end
    true
  end
end
