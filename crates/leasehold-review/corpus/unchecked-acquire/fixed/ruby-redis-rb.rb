# Fixed: the boolean reply decides whether the sync runs.
require "redis"
require "securerandom"

class InventorySync
  RELEASE = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end"

  def initialize(redis)
    @redis = redis
  end

  def call(warehouse_id)
    key = "lock:inventory-sync:#{warehouse_id}"
    token = SecureRandom.uuid
    acquired = @redis.set(key, token, nx: true, px: 45_000)
    return false unless acquired

    begin
      yield warehouse_id
    ensure
      @redis.eval(RELEASE, keys: [key], argv: [token])
    end
    true
  end
end
