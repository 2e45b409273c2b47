# Fixed: the ensure runs a compare-and-delete script with this run's token, so an expired holder
# cannot remove a lock that now belongs to someone else.
require "redis"
require "securerandom"

class ExportJob
  RELEASE = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end"

  def initialize(redis)
    @redis = redis
  end

  def perform(account_id)
    lock_key = "lock:export:#{account_id}"
    token = SecureRandom.hex(16)
    return unless @redis.set(lock_key, token, nx: true, px: 300_000)

    begin
      build_export(account_id)
    ensure
      @redis.eval(RELEASE, keys: [lock_key], argv: [token])
    end
  end

  def expire_download_link(account_id)
    # Removing a cached download link, not a lock key.
    @redis.del("export:link:#{account_id}")
  end

  private

  def build_export(account_id)
    Rails.logger.info("exporting #{account_id}")
  end
end
