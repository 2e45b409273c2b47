<?php // Fixed: set()'s reply is checked and the batch is skipped when the lock is held elsewhere.
// (Companion of bad/php-phpredis.php: set(... ['nx', 'px']) as a bare statement.)

namespace App\Payouts;

final class PayoutBatchSender
{
    private const RELEASE = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

    public function __construct(private \Redis $redis, private PayoutBatch $batch)
    {
    }

    public function send(string $batchId): bool
    {
        $key = "lock:payout-batch:{$batchId}";
        $token = bin2hex(random_bytes(16));
        if ($this->redis->set($key, $token, ['nx', 'px' => 30000]) !== true) {
            return false;
        }
        try {
            $this->batch->send($batchId);
        } finally {
            $this->redis->eval(self::RELEASE, [$key, $token], 1);
        }
        return true;
    }
}
