<?php // Reproduces: Laravel Redis::setnx() then Redis::expire() as two commands (a worker killed between them
// leaves lock:sync:* with no TTL), the SETNX-then-EXPIRE pattern the Redis SETNX page calls unsafe
// and Laravel's own Cache::lock avoids.

namespace App\Jobs;

use Illuminate\Support\Facades\Redis;
use Illuminate\Support\Str;

class SyncWarehouseStock
{
    private const RELEASE = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

    public function __construct(private int $warehouseId)
    {
    }

    public function handle(StockSynchronizer $sync): void
    {
        $key = 'lock:sync:' . $this->warehouseId;
        $owner = (string) Str::uuid();
        if (! Redis::setnx($key, $owner)) { // expect: nx-without-expiry
            return;
        }
        Redis::expire($key, 120);
        try {
            $sync->run($this->warehouseId);
        } finally {
            Redis::eval(self::RELEASE, 1, $key, $owner);
        }
    }
}
