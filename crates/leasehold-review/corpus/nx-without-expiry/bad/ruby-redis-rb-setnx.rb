# Reproduces: the classic `setnx(key, Process.pid)` then `expire` lock: no TTL if the process
# dies between the two calls, a pid that is the same for every thread of the process, and a
# GET-compare-then-DEL release that can delete a lock re-acquired between the two commands.
require "redis"

module FeedLock
  KEY = "lock:feed-refresh"

  def self.with_lock(redis, ttl: 120)
    return false unless redis.setnx(KEY, Process.pid) # expect: nx-without-expiry, constant-lock-value
    redis.expire(KEY, ttl)
    begin
      yield
    ensure
      release(redis)
    end
    true
  end

  def self.release(redis)
    return unless redis.get(KEY) == Process.pid.to_s
    redis.del(KEY) # expect: release-without-owner-check
  end
end
