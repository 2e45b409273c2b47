<?php // Fixed: the POST carries an Idempotency-Key derived from the shipment, so a repeated purchase from a job
// whose lease expired is deduplicated by the carrier. (Companion of bad/php-laravel.php.)

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
        if (! $lock->get()) {
            return;
        }
        try {
            $idempotencyKey = 'label-' . $this->shipmentId;
            Http::withHeaders(['Idempotency-Key' => $idempotencyKey])
                ->post('https://api.carrier.example/v2/labels', ['shipment' => $this->shipmentId])
                ->throw();
        } finally {
            $lock->release();
        }
    }
}
