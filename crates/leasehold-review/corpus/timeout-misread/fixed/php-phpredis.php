<?php // Fixed: a RedisException on the SET NX is rethrown as "lock state unknown" instead of being read as
// "busy"; a SET that did land expires after its TTL. (Companion of bad/php-phpredis.php.)

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
        } catch (\RedisException $e) {
            throw new LockStateUnknownException("could not tell whether lock:sitemap:{$site} was taken", 0, $e);
        }
        return $ok === true ? $token : null;
    }
}
