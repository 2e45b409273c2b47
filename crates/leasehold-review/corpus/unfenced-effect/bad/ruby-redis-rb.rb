# Reproduces: a Redis lease around an ActiveRecord save with no fence or version check: a worker
# paused past the lease TTL saves its stale copy of the shipment over the newer holder's change.
require "redis"
require "securerandom"

class ShipmentLabeler
  RELEASE = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end"

  def initialize(redis)
    @redis = redis
  end

  def label!(shipment_id, carrier)
    key = "lock:shipment:#{shipment_id}"
    owner = SecureRandom.uuid
    return false unless @redis.set(key, owner, nx: true, px: 20_000) # expect: unfenced-effect

    begin
      shipment = Shipment.find(shipment_id)
      shipment.label_url = carrier.create_label(shipment)
      shipment.status = "labelled"
      shipment.save!
    ensure
      @redis.eval(RELEASE, keys: [key], argv: [owner])
    end
    true
  end
end
