<?php // Fixed: set() with ['nx', 'px' => 30000] takes the lock and its TTL in one command.
// (Companion of bad/php-phpredis.php: setnx() then expire().)
// Release compares the owner token in Lua.

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
        if ($this->redis->set($key, $token, ['nx', 'px' => 30000]) !== true) {
            return null;
        }
        return $token;
    }

    public function release(string $exportId, string $token): bool
    {
        return $this->redis->eval(self::RELEASE, ['lock:export:' . $exportId, $token], 1) === 1;
    }
}
