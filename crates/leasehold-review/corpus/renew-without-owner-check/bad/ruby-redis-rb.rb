# Reproduces: a long-running Ruby job that "extends" its lock with a bare EXPIRE between batches:
# if a slow batch let the lease expire and another worker took the lock, EXPIRE extends that
# worker's lock and this job carries on as if it still owned it.
require "redis"
require "securerandom"

class ReindexJob
  LOCK_KEY = "lock:reindex"
  TTL = 30
  RELEASE = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end"

  def initialize(redis)
    @redis = redis
  end

  def run(batches)
    token = SecureRandom.uuid
    return false unless @redis.set(LOCK_KEY, token, nx: true, ex: TTL)

    begin
      batches.each do |batch|
        batch.call
        extend_lock
      end
    ensure
      @redis.eval(RELEASE, keys: [LOCK_KEY], argv: [token])
    end
    true
  end

  private

  def extend_lock
    @redis.expire(LOCK_KEY, TTL) # expect: renew-without-owner-check
  end
end
