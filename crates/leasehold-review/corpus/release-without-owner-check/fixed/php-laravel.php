<?php // Fixed: Cache::lock() with a random owner; release() deletes only if the owner still matches.
// (Companion of bad/php-laravel.php: Redis::del() as the release.)
// forceRelease() is the deliberate operator override for a stuck lock: not a finding.

namespace App\Jobs;

use Illuminate\Support\Facades\Cache;

class RecalculateLoyaltyPoints
{
    public function __construct(private int $customerId)
    {
    }

    public function handle(LoyaltyCalculator $calculator): void
    {
        $lock = Cache::lock('loyalty:' . $this->customerId, 60);
        if (! $lock->get()) {
            return;
        }
        try {
            $calculator->recalculate($this->customerId);
        } finally {
            $lock->release();
        }
    }

    /** Called by `php artisan loyalty:unlock {customer}` after an operator checked the worker is gone. */
    public static function breakLock(int $customerId): void
    {
        Cache::lock('loyalty:' . $customerId)->forceRelease();
    }
}
