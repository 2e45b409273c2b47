<?php // Reproduces: phpredis setnx() followed by a separate expire() (a fatal error or FPM timeout between
// the two calls leaves the lock with no TTL and every later export is refused), the SETNX-then-EXPIRE
// pattern the Redis SETNX page calls unsafe.

namespace App\Export;

final class ExportLock
{
    private const RELEASE = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

    public function __construct(private \Redis $redis)
    {
    }

    /** Returns the owner token, or null when another worker holds the export. */
    public function acquire(string $exportId): ?string
    {
        $key = 'lock:export:' . $exportId;
        $token = bin2hex(random_bytes(16));
        if (!$this->redis->setnx($key, $token)) { // expect: nx-without-expiry
            return null;
        }
        $this->redis->expire($key, 30);
        return $token;
    }

    public function release(string $exportId, string $token): bool
    {
        return $this->redis->eval(self::RELEASE, ['lock:export:' . $exportId, $token], 1) === 1;
    }
}
