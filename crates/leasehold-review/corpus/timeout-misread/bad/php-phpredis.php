<?php // Reproduces: a RedisException (read timeout) from the SET NX caught and returned as "busy" (the SET may
// have been applied, so the lock blocks everyone for its TTL while the caller reports contention), the
// ambiguous-timeout point of Kleppmann's lock analysis.

namespace App\Sitemaps;

final class SitemapLock
{
    public function __construct(private \Redis $redis)
    {
    }

    /** Returns the owner token, or null when another worker is building the sitemap. */
    public function acquire(string $site): ?string
    {
        $token = bin2hex(random_bytes(16));
        try {
            $ok = $this->redis->set("lock:sitemap:{$site}", $token, ['nx', 'ex' => 120]);
        } catch (\RedisException $e) { // expect: timeout-misread
            return null;
        }
        return $ok === true ? $token : null;
    }
}
