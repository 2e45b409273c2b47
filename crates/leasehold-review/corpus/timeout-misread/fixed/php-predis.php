<?php // Fixed: on a connection timeout the gate asks Redis who holds the key and grants only when it carries
// this worker's token; if that read fails too, the exception propagates. (Companion of bad/php-predis.php.)

namespace App\Newsletter;

use Predis\Client;
use Predis\Connection\ConnectionException;

final class SendGate
{
    public function __construct(private Client $client)
    {
    }

    public function mayStart(string $issue, string $token): bool
    {
        $key = "lock:newsletter:{$issue}";
        try {
            return $this->client->set($key, $token, 'EX', 900, 'NX') !== null;
        } catch (ConnectionException $e) {
            return $this->client->get($key) === $token;
        }
    }
}
