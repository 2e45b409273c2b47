<?php // Fixed: a RedisException from the acquire propagates, so the rebuild never runs unlocked (fail closed).
// (Companion of bad/php-phpredis.php: the exception logged and swallowed.)

namespace App\Feeds;

final class FeedRebuilder
{
    private const RELEASE = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

    public function __construct(private \Redis $redis, private FeedBuilder $builder)
    {
    }

    public function rebuild(int $feedId): bool
    {
        $key = "lock:feed-rebuild:{$feedId}";
        $token = bin2hex(random_bytes(16));
        if ($this->redis->set($key, $token, ['nx', 'px' => 60000]) !== true) {
            return false;
        }
        try {
            $this->builder->build($feedId);
        } finally {
            $this->redis->eval(self::RELEASE, [$key, $token], 1);
        }
        return true;
    }
}
