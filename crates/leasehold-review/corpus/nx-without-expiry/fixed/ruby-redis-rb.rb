# Fixed: nx: true and px: together in one SET, so the lock expires if the worker dies; random
# token per run and a compare-and-delete release script.
require "redis"
require "securerandom"

class InvoiceBatch
  LOCK_KEY = "lock:invoice-batch"
  RELEASE = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end"

  def initialize(redis = Redis.new)
    @redis = redis
  end

  def perform
    token = SecureRandom.uuid
    return :skipped unless @redis.set(LOCK_KEY, token, nx: true, px: 600_000)

    begin
      yield
    ensure
      @redis.eval(RELEASE, keys: [LOCK_KEY], argv: [token])
    end
    :done
  end

  def remember_total(total)
    # A cache write with an expiry: not a lock.
    @redis.set("invoice-batch:last-total", total, ex: 3600)
  end
end
