<?php // Reproduces: Cache::lock() guarding an HTTP POST that buys a shipping label, with no idempotency key (the job
// outlives its lease, a retry takes the lock and also posts, and two labels are bought), the
// fencing/idempotency argument of Kleppmann's "How to do distributed locking".

namespace App\Jobs;

use Illuminate\Support\Facades\Cache;
use Illuminate\Support\Facades\Http;

class BuyShippingLabel
{
    public function __construct(private int $shipmentId)
    {
    }

    public function handle(): void
    {
        $lock = Cache::lock('label:' . $this->shipmentId, 30);
        if (! $lock->get()) { // expect: unfenced-effect
            return;
        }
        try {
            Http::post('https://api.carrier.example/v2/labels', [
                'shipment' => $this->shipmentId,
            ])->throw();
        } finally {
            $lock->release();
        }
    }
}
