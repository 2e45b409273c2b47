# Fixed: the transaction-scoped pg_try_advisory_xact_lock inside DB.transaction: the lock lives
# and dies with that one transaction on one connection.
require "sequel"

DB = Sequel.connect(ENV.fetch("DATABASE_URL"), max_connections: 8)

class CampaignSender
  def initialize(campaign_id)
    @campaign_id = campaign_id
  end

  def deliver
    DB.transaction do
      locked = DB.get(Sequel.function(:pg_try_advisory_xact_lock, @campaign_id))
      return false unless locked

      yield @campaign_id
    end
    true
  end
end
