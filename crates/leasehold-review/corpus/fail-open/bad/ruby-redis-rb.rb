# Reproduces: a Redis error around the acquire rescued with a log line, after which the block
# runs anyway: the lock silently turns into "no lock" whenever Redis is down or failing over.
require "logger"
require "redis"
require "securerandom"

class DunningRun
  KEY = "lock:dunning"
  RELEASE = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end"

  def initialize(redis, logger = Logger.new($stdout))
    @redis = redis
    @logger = logger
  end

  def call
    token = SecureRandom.uuid
    begin
      return :busy unless @redis.set(KEY, token, nx: true, px: 900_000)
    rescue Redis::BaseError => e # expect: fail-open
      @logger.warn("dunning lock unavailable (#{e.class}); running anyway")
    end

    begin
      yield
    ensure
      @redis.eval(RELEASE, keys: [KEY], argv: [token])
    end
    :done
  end
end
