<?php // Fixed: acquire() writes a random token per call and returns it; release() compares that token.
// (Companion of bad/php-phpredis.php: gethostname() as the lock value.)

namespace App\Search;

final class ReindexLock
{
    private const RELEASE = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

    public function __construct(private \Redis $redis)
    {
    }

    /** Returns the owner token, or null when another worker is reindexing. */
    public function acquire(string $index): ?string
    {
        $token = bin2hex(random_bytes(16));
        return $this->redis->set("lock:reindex:{$index}", $token, ['nx', 'ex' => 300]) === true ? $token : null;
    }

    public function release(string $index, string $token): bool
    {
        return $this->redis->eval(self::RELEASE, ["lock:reindex:{$index}", $token], 1) === 1;
    }
}
