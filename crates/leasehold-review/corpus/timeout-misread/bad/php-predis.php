<?php // Reproduces: a Predis connection timeout on SET NX read as a grant (if the SET never landed, or another
// worker's did, two workers send the newsletter), the ambiguous-timeout point of Kleppmann's lock
// analysis, misread the other way.

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
        try {
            return $this->client->set("lock:newsletter:{$issue}", $token, 'EX', 900, 'NX') !== null;
        } catch (ConnectionException $e) { // expect: timeout-misread
            return true;
        }
    }
}
