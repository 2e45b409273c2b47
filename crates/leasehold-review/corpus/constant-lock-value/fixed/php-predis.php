<?php // Fixed: a random token per run is the lock value and the release compares it.
// (Companion of bad/php-predis.php: getmypid() as the lock value.)

namespace App\Reports;

use Predis\Client;

final class NightlyReport
{
    private const RELEASE = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

    public function __construct(private Client $client, private ReportBuilder $builder)
    {
    }

    public function run(string $date): bool
    {
        $key = "lock:nightly:{$date}";
        $token = bin2hex(random_bytes(16));
        if ($this->client->set($key, $token, 'EX', 600, 'NX') === null) {
            return false;
        }
        try {
            $this->builder->build($date);
        } finally {
            $this->client->eval(self::RELEASE, 1, $key, $token);
        }
        return true;
    }
}
