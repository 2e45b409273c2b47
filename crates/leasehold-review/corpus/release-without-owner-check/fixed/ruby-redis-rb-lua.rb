# Fixed: the heredoc script compares the stored value with ARGV[1] (this lease's owner) before
# DEL; break_lock! is the deliberate operator API for a lock left by a dead process.
require "redis"
require "securerandom"

class MutexLease
  RELEASE_SCRIPT = <<~LUA
    if redis.call("get", KEYS[1]) == ARGV[1] then
      return redis.call("del", KEYS[1])
    end
    return 0
  LUA

  def initialize(redis, name, ttl_ms: 20_000)
    @redis = redis
    @key = "lock:#{name}"
    @ttl_ms = ttl_ms
    @owner = SecureRandom.uuid
  end

  def synchronize
    raise "#{@key} is busy" unless @redis.set(@key, @owner, nx: true, px: @ttl_ms)

    begin
      yield
    ensure
      @redis.eval(RELEASE_SCRIPT, keys: [@key], argv: [@owner])
    end
  end

  def break_lock!
    @redis.del(@key)
  end
end
