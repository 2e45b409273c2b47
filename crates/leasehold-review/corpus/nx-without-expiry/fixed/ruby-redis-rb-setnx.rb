# Fixed: SET NX EX in one command with a random token per acquire; the release compares the
# token and deletes inside one Lua script, so it cannot remove another holder's lock.
require "redis"
require "securerandom"

module FeedLock
  KEY = "lock:feed-refresh"
  RELEASE = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end"

  def self.with_lock(redis, ttl: 120)
    token = SecureRandom.uuid
    return false unless redis.set(KEY, token, nx: true, ex: ttl)
    begin
      yield
    ensure
      release(redis, token)
    end
    true
  end

  def self.release(redis, token)
    redis.eval(RELEASE, keys: [KEY], argv: [token])
  end
end
