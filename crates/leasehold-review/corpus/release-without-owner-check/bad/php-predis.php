<?php // Reproduces: WATCH, GET and compare, then DEL with no MULTI/EXEC (WATCH only guards a transaction; a bare
// DEL after it runs unconditionally, so a lease that expired after the GET still loses its successor's
// lock), the check-then-delete race the Redis distributed-locks page says must be one Lua script.

namespace App\Locks;

use Predis\Client;

final class FeedLock
{
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
        $key = "lock:feed:{$feed}";
        $this->client->watch($key);
        if ($this->client->get($key) !== $token) {
            $this->client->unwatch();
            return false;
        }
        $this->client->del([$key]); // expect: release-without-owner-check
        return true;
    }
}
