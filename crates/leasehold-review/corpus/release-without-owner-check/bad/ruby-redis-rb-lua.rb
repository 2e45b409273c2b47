# Reproduces: a Lua release script in a heredoc that DELs KEYS[1] without comparing ARGV[1] to
# the stored owner: it is atomic but checks nothing, so after a lease expiry it removes the next
# holder's lock just like a bare DEL.
require "redis"
require "securerandom"

class MutexLease
  RELEASE_SCRIPT = <<~LUA # expect: release-without-owner-check
    if redis.call("exists", KEYS[1]) == 1 then
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
end
