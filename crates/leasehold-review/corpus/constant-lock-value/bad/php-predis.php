<?php // Reproduces: getmypid() as the lock value through Predis SET EX NX (pids repeat across containers and are
// reused after restarts, so the owner check in the release can match a different holder), the
// "value must be unique per acquire" point of the Redis locking pattern.

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
        $pid = (string) getmypid();
        if ($this->client->set($key, $pid, 'EX', 600, 'NX') === null) { // expect: constant-lock-value
            return false;
        }
        try {
            $this->builder->build($date);
        } finally {
            $this->client->eval(self::RELEASE, 1, $key, $pid);
        }
        return true;
    }
}
