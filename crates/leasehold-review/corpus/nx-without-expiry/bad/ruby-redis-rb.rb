# Reproduces: redis-rb `set(key, token, nx: true)` with no ex:/px:, so a Sidekiq worker killed
# mid-job (deploy, OOM) leaves the lock key with no TTL and the job is skipped forever after,
# the stuck-lock failure the redis.io SET page's locking notes describe.
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
    return :skipped unless @redis.set(LOCK_KEY, token, nx: true) # expect: nx-without-expiry

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
