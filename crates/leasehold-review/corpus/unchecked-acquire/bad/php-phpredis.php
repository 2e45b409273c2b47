<?php // Reproduces: phpredis set($k, $v, ['nx', 'px' => ...]) as a bare statement (it returns false when another
// worker holds the key, and the payout batch is sent twice), the "check the SET reply" point of the
// Redis locking pattern.

namespace App\Payouts;

final class PayoutBatchSender
{
    private const RELEASE = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

    public function __construct(private \Redis $redis, private PayoutBatch $batch)
    {
    }

    public function send(string $batchId): void
    {
        $key = "lock:payout-batch:{$batchId}";
        $token = bin2hex(random_bytes(16));
        $this->redis->set($key, $token, ['nx', 'px' => 30000]); // expect: unchecked-acquire
        try {
            $this->batch->send($batchId);
        } finally {
            $this->redis->eval(self::RELEASE, [$key, $token], 1);
        }
    }
}
