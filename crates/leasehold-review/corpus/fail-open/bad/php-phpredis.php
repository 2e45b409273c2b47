<?php // Reproduces: a RedisException from the acquire logged with error_log() and swallowed, after which the feed
// rebuild runs unlocked on every worker (fail-open), the kind Kleppmann's lock analysis calls out.

namespace App\Feeds;

final class FeedRebuilder
{
    private const RELEASE = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

    public function __construct(private \Redis $redis, private FeedBuilder $builder)
    {
    }

    public function rebuild(int $feedId): void
    {
        $key = "lock:feed-rebuild:{$feedId}";
        $token = bin2hex(random_bytes(16));
        try {
            if ($this->redis->set($key, $token, ['nx', 'px' => 60000]) !== true) {
                return;
            }
        } catch (\RedisException $e) { // expect: fail-open
            error_log("feed lock unavailable, rebuilding {$feedId} anyway: " . $e->getMessage());
        }
        try {
            $this->builder->build($feedId);
        } finally {
            $this->redis->eval(self::RELEASE, [$key, $token], 1);
        }
    }
}
