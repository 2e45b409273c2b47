<?php // Fixed: renew() runs a Lua script that extends the key only while it holds this lock's token.
// (Companion of bad/php-predis.php: SET XX PX as the renewal.)

namespace App\Locks;

use Predis\Client;

final class RenewableLock
{
    private const EXTEND = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) else return 0 end";

    public function __construct(private Client $client, private string $key, private string $token)
    {
    }

    public function renew(int $leaseMs): bool
    {
        return (int) $this->client->eval(self::EXTEND, 1, $this->key, $this->token, $leaseMs) === 1;
    }
}
