<?php // Fixed: while holding the lock the request takes a fence from INCR and the UPDATE applies only if that
// fence is newer than the one stored with the wallet. (Companion of bad/php-phpredis.php.)

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
        if ($this->redis->set($key, $token, ['nx', 'px' => 5000]) !== true) {
            return false;
        }
        try {
            $fence = $this->redis->incr("fence:wallet:{$userId}");
            $update = $this->pdo->prepare('UPDATE wallets SET balance = balance + ?, fence = ? WHERE user_id = ? AND fence < ?');
            $update->execute([$cents, $fence, $userId, $fence]);
            return $update->rowCount() === 1;
        } finally {
            $this->redis->eval(self::RELEASE, [$key, $token], 1);
        }
    }
}
