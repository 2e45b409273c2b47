# Reproduces: Socket.gethostname as the lock value in a constant: every Puma thread and every
# Sidekiq process on a host writes the same value, so the owner check in the release passes for
# a holder whose lease already expired and was re-acquired by a neighbour on the same host.
require "redis"
require "socket"

module SnapshotLock
  OWNER = Socket.gethostname
  RELEASE = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end"

  def self.with_lock(redis, project_id)
    key = "lock:snapshot:#{project_id}"
    acquired = redis.set(key, OWNER, nx: true, ex: 60) # expect: constant-lock-value
    return false unless acquired

    begin
      yield
    ensure
      redis.eval(RELEASE, keys: [key], argv: [OWNER])
    end
    true
  end
end
