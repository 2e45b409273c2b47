<?php // Reproduces: renewing with SET key token XX PX through Predis (XX checks only that some value exists, so
// after the lease lapsed and another worker acquired, this overwrites that worker's token with ours),
// the unchecked-extend kind the Redlock "extend" guidance warns about.

namespace App\Locks;

use Predis\Client;

final class RenewableLock
{
    public function __construct(private Client $client, private string $key, private string $token)
    {
    }

    public function renew(int $leaseMs): bool
    {
        $reply = $this->client->set($this->key, $this->token, 'XX', 'PX', $leaseMs); // expect: renew-without-owner-check
        return $reply !== null;
    }
}
