# Reproduces: Redis::TimeoutError from the acquire rescued as "not acquired": the SET may have
# been applied, so the lock now belongs to a worker that has already moved on, and the nightly
# job stays blocked until the TTL expires.
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
  rescue Redis::TimeoutError # expect: timeout-misread
    false
  end
end
