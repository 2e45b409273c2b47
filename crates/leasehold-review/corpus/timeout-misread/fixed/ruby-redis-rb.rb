# Fixed: on a timeout the owner-checked release runs with this run's token, clearing a SET that
# may have landed, and the error is re-raised so the scheduler retries the job.
require "redis"
require "securerandom"

class NightlyCleanup
  RELEASE = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end"

  def initialize(redis = Redis.new(timeout: 0.5))
    @redis = redis
  end

  def run
    token = SecureRandom.uuid
    return :busy unless acquire("lock:nightly-cleanup", token)

    begin
      yield
    ensure
      @redis.eval(RELEASE, keys: ["lock:nightly-cleanup"], argv: [token])
    end
    :done
  end

  private

  def acquire(key, token)
    @redis.set(key, token, nx: true, ex: 3600)
  rescue Redis::TimeoutError
    @redis.eval(RELEASE, keys: [key], argv: [token])
    raise
  end
end
