<?php // Reproduces: a long-running import that extends its lock with a bare pexpire() between batches (if a batch
// ran past the lease and another worker took the key, this extends the other worker's lock and both keep
// importing), the unchecked-extend kind the Redlock "extend" guidance warns about.

namespace App\Import;

final class BatchedImporter
{
    private const LEASE_MS = 30000;
    private const RELEASE = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

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
                $this->redis->pexpire($key, self::LEASE_MS); // expect: renew-without-owner-check
            }
        } finally {
            $this->redis->eval(self::RELEASE, [$key, $token], 1);
        }
        return true;
    }
}
