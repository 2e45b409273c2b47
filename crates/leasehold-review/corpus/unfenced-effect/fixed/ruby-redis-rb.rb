# Fixed: an INCR fence taken after acquiring is written with the row, and the UPDATE only matches
# while no later holder has written a higher fence.
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
    return false unless @redis.set(key, owner, nx: true, px: 20_000)

    begin
      fence = @redis.incr("fence:shipment:#{shipment_id}")
      label_url = carrier.create_label(Shipment.find(shipment_id), idempotency_key: "label-#{shipment_id}")
      updated = Shipment.where(id: shipment_id).where("fence < ?", fence)
                        .update_all(label_url: label_url, status: "labelled", fence: fence)
      raise "stale lease for shipment #{shipment_id}" if updated.zero?
    ensure
      @redis.eval(RELEASE, keys: [key], argv: [owner])
    end
    true
  end
end
