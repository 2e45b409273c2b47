<?php // Fixed: Cache::lock() takes the lock with SET NX EX and a random owner in one command, and release()
// compares the owner. (Companion of bad/php-laravel.php: Redis::setnx() then Redis::expire().)
// Nothing else in the job writes outside the synchronizer.

namespace App\Jobs;

use Illuminate\Support\Facades\Cache;

class SyncWarehouseStock
{
    public function __construct(private int $warehouseId)
    {
    }

    public function handle(StockSynchronizer $sync): void
    {
        $lock = Cache::lock('sync:' . $this->warehouseId, 120);
        if (! $lock->get()) {
            return;
        }
        try {
            $sync->run($this->warehouseId);
        } finally {
            $lock->release();
        }
    }
}
