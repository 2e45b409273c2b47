<?php // Fixed: compare and delete in one Lua script through Predis eval, so a lease that expired between the
// check and the delete cannot cost the successor its lock.
// (Companion of bad/php-predis.php: WATCH + GET + DEL without MULTI.)

namespace App\Locks;

use Predis\Client;

final class FeedLock
{
    private const RELEASE = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

    public function __construct(private Client $client)
    {
    }

    public function acquire(string $feed): ?string
    {
        $token = bin2hex(random_bytes(16));
        $reply = $this->client->set("lock:feed:{$feed}", $token, 'PX', 20000, 'NX');
        return $reply !== null ? $token : null;
    }

    public function release(string $feed, string $token): bool
    {
        return (int) $this->client->eval(self::RELEASE, 1, "lock:feed:{$feed}", $token) === 1;
    }
}
