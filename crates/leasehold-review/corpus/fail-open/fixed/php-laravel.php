<?php // Fixed: an exception from Cache::lock()->get() propagates and the command fails without pruning
// (fail closed); the scheduler runs it again on the next tick. (Companion of bad/php-laravel.php.)

namespace App\Console\Commands;

use Illuminate\Console\Command;
use Illuminate\Support\Facades\Cache;

class PruneStaleCarts extends Command
{
    protected $signature = 'carts:prune';

    public function handle(CartPruner $pruner): int
    {
        $lock = Cache::lock('carts:prune', 300);
        if (! $lock->get()) {
            return self::SUCCESS;
        }
        try {
            $pruner->prune();
        } finally {
            $lock->release();
        }
        return self::SUCCESS;
    }
}
