# Fixed: each acquire stores a fresh SecureRandom.uuid (host name only as a prefix) and passes
# the same value to the release script.
require "redis"
require "securerandom"
require "socket"

module SnapshotLock
  RELEASE = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end"

  def self.with_lock(redis, project_id)
    key = "lock:snapshot:#{project_id}"
    owner = "#{Socket.gethostname}:#{SecureRandom.uuid}"
    acquired = redis.set(key, owner, nx: true, ex: 60)
    return false unless acquired

    begin
      yield
    ensure
      redis.eval(RELEASE, keys: [key], argv: [owner])
    end
    true
  end
end
