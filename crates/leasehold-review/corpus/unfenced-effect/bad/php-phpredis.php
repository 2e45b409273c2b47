<?php // Reproduces: a Redis lock guarding a wallet UPDATE through PDO with no fencing token (a request stalled past
// its lease writes a balance computed from stale data after the next holder wrote), the fencing-token
// argument of Kleppmann's "How to do distributed locking".

namespace App\Wallet;

final class WalletCredit
{
    private const RELEASE = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

    public function __construct(private \Redis $redis, private \PDO $pdo)
    {
    }

    public function credit(int $userId, int $cents): bool
    {
        $key = "lock:wallet:{$userId}";
        $token = bin2hex(random_bytes(16));
        if ($this->redis->set($key, $token, ['nx', 'px' => 5000]) !== true) { // expect: unfenced-effect
            return false;
        }
        try {
            $select = $this->pdo->prepare('SELECT balance FROM wallets WHERE user_id = ?');
            $select->execute([$userId]);
            $balance = (int) $select->fetchColumn();
            $this->pdo->prepare('UPDATE wallets SET balance = ? WHERE user_id = ?')->execute([$balance + $cents, $userId]);
        } finally {
            $this->redis->eval(self::RELEASE, [$key, $token], 1);
        }
        return true;
    }
}
