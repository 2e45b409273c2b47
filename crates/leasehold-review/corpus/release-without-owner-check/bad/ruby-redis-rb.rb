# Reproduces: release by a bare UNLINK in `ensure`: when the job outlives the lock's TTL another
# worker acquires, and this worker's ensure unlinks the new holder's lock (holder A expires,
# B acquires, A's UNLINK removes B's lock).
require "redis"
require "securerandom"

class ExportJob
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
      @redis.unlink(lock_key) # expect: release-without-owner-check
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
