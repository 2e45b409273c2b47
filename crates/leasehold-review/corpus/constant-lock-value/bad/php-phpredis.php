<?php // Reproduces: gethostname() as the lock value, set in the constructor (every FPM worker on the host writes
// the same value, so one request's owner-checked release frees another request's lock), the
// "value must be unique per acquire" point of the Redis locking pattern.

namespace App\Search;

final class ReindexLock
{
    private const RELEASE = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

    private string $owner;

    public function __construct(private \Redis $redis)
    {
        $this->owner = gethostname();
    }

    public function acquire(string $index): bool
    {
        return $this->redis->set("lock:reindex:{$index}", $this->owner, ['nx', 'ex' => 300]) === true; // expect: constant-lock-value
    }

    public function release(string $index): bool
    {
        return $this->redis->eval(self::RELEASE, ["lock:reindex:{$index}", $this->owner], 1) === 1;
    }
}
