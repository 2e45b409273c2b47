<?php // Reproduces: Cache::lock()->get() wrapped in a catch that only logs, so when the lock store is down the
// scheduled command runs on every server without the lock (fail-open), the kind Kleppmann's lock
// analysis calls out.

namespace App\Console\Commands;

use Illuminate\Console\Command;
use Illuminate\Support\Facades\Cache;
use Illuminate\Support\Facades\Log;

class PruneStaleCarts extends Command
{
    protected $signature = 'carts:prune';

    public function handle(CartPruner $pruner): int
    {
        $lock = Cache::lock('carts:prune', 300);
        $held = false;
        try {
            if (! $lock->get()) {
                return self::SUCCESS;
            }
            $held = true;
        } catch (\Throwable $e) { // expect: fail-open
            Log::warning('carts:prune lock unavailable, pruning anyway', ['exception' => $e]);
        }
        try {
            $pruner->prune();
        } finally {
            if ($held) {
                $lock->release();
            }
        }
        return self::SUCCESS;
    }
}
