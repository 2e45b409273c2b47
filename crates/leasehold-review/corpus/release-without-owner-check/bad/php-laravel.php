<?php // Reproduces: a Laravel job that takes SET NX EX with a random owner but releases with Redis::del()
// (the job outlives its 60 s lease, a retry acquires, the first run's del() frees the retry's lock),
// the unconditional-release kind Laravel's Cache::lock release() avoids by comparing the owner.

namespace App\Jobs;

use Illuminate\Support\Facades\Redis;
use Illuminate\Support\Str;

class RecalculateLoyaltyPoints
{
    public function __construct(private int $customerId)
    {
    }

    public function handle(LoyaltyCalculator $calculator): void
    {
        $key = 'lock:loyalty:' . $this->customerId;
        if (! Redis::set($key, (string) Str::uuid(), 'EX', 60, 'NX')) {
            return;
        }
        try {
            $calculator->recalculate($this->customerId);
        } finally {
            Redis::del($key); // expect: release-without-owner-check
        }
    }
}
