<?php
// Reproduces: a cache-store lock released by reading the owner and then forgetting the key;
// fixed: the Redis-backed store releases with one script that compares the owner and deletes.

class ReportLock
{
    private const RELEASE = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

    public function __construct(private $redis, private string $name, private string $owner)
    {
    }

    public function release(): bool
    {
        return (bool) $this->redis->eval(self::RELEASE, [$this->name, $this->owner], 1);
    }
}
