<?php // Fixed: between batches the lease is extended by a compare-and-pexpire Lua script, and the import stops
// when the key no longer holds this worker's token. (Companion of bad/php-phpredis.php.)

namespace App\Import;

final class BatchedImporter
{
    private const LEASE_MS = 30000;
    private const RELEASE = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";
    private const EXTEND = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) else return 0 end";

    public function __construct(private \Redis $redis, private RowSource $source)
    {
    }

    public function import(string $feed): bool
    {
        $key = "lock:import:{$feed}";
        $token = bin2hex(random_bytes(16));
        if ($this->redis->set($key, $token, ['nx', 'px' => self::LEASE_MS]) !== true) {
            return false;
        }
        try {
            foreach ($this->source->batches($feed) as $batch) {
                $batch->apply();
                if ($this->redis->eval(self::EXTEND, [$key, $token, self::LEASE_MS], 1) !== 1) {
                    throw new LeaseLostException("lost {$key} during import");
                }
            }
        } finally {
            $this->redis->eval(self::RELEASE, [$key, $token], 1);
        }
        return true;
    }
}
