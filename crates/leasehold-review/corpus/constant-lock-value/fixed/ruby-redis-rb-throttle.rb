# Not a bug: a once-a-minute throttle (the shape of Sidekiq's process cleanup). SET NX EX with
# the constant "1", and nothing ever deletes, renews or reads the key: its expiry alone ends it,
# so it does not matter that every process writes the same value.
require "redis"

class ProcessSweeper
  def initialize(redis)
    @redis = redis
  end

  # Runs at most once a minute across all processes; returns how many it pruned.
  def sweep
    return 0 unless @redis.set("process_cleanup", "1", nx: true, ex: 60)

    dead = @redis.smembers("processes").reject { |key| @redis.exists?(key) }
    dead.empty? ? 0 : @redis.srem("processes", dead)
  end
end
