# Fixed: extend_lock runs a compare-then-EXPIRE script with this run's token and raises when the
# lock is no longer ours, so the job stops instead of running unprotected.
require "redis"
require "securerandom"

class ReindexJob
  class LockLost < StandardError; end

  LOCK_KEY = "lock:reindex"
  TTL = 30
  RELEASE = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end"
  EXTEND = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('expire', KEYS[1], ARGV[2]) else return 0 end"

  def initialize(redis)
    @redis = redis
  end

  def run(batches)
    token = SecureRandom.uuid
    return false unless @redis.set(LOCK_KEY, token, nx: true, ex: TTL)

    begin
      batches.each do |batch|
        batch.call
        extend_lock(token)
      end
    ensure
      @redis.eval(RELEASE, keys: [LOCK_KEY], argv: [token])
    end
    true
  end

  private

  def extend_lock(token)
    extended = @redis.eval(EXTEND, keys: [LOCK_KEY], argv: [token, TTL])
    raise LockLost, LOCK_KEY unless extended == 1
  end
end
