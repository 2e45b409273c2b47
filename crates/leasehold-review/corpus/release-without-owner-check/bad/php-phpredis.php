<?php // Reproduces: a bare $redis->del($key) in finally (the 10 s lease expires during a slow PDF render,
// a second request acquires, the first request's finally deletes the second's lock), the unconditional
// release kind the Redis distributed-locks page warns about.

namespace App\Invoices;

final class InvoicePdfBuilder
{
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
            $this->redis->del($key); // expect: release-without-owner-check
        }
        // Not a lock: the cached invoice listing is stale now.
        $this->redis->del("cache:invoices:list");
        return true;
    }
}
