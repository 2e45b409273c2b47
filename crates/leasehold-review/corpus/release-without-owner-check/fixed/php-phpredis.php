<?php // Fixed: the release deletes the key only if it still holds this request's token (Lua compare-and-delete),
// so a request whose lease expired cannot remove another request's lock.
// (Companion of bad/php-phpredis.php: a bare del() in finally.)

namespace App\Invoices;

final class InvoicePdfBuilder
{
    private const RELEASE = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

    public function __construct(private \Redis $redis, private PdfRenderer $renderer)
    {
    }

    public function build(int $invoiceId): bool
    {
        $key = "lock:invoice-pdf:{$invoiceId}";
        $token = bin2hex(random_bytes(16));
        if ($this->redis->set($key, $token, ['nx', 'px' => 10000]) !== true) {
            return false;
        }
        try {
            $this->renderer->render($invoiceId);
        } finally {
            $this->redis->eval(self::RELEASE, [$key, $token], 1);
        }
        // Not a lock: the cached invoice listing is stale now.
        $this->redis->del("cache:invoices:list");
        return true;
    }
}
