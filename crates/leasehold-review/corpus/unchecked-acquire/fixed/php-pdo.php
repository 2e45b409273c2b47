<?php // Fixed: GET_LOCK's result is fetched and the day-close is skipped unless it is 1.
// (Companion of bad/php-pdo.php: GET_LOCK through query() never fetched.) A PDO object is one
// MySQL session, so lock and release share a connection.

namespace App\Accounting;

final class DayCloser
{
    public function __construct(private \PDO $pdo, private Ledger $ledger)
    {
    }

    public function closeDay(string $date): bool
    {
        $lock = $this->pdo->prepare('SELECT GET_LOCK(?, ?)');
        $lock->execute(['day-close', 10]);
        if ((int) $lock->fetchColumn() !== 1) {
            return false;
        }
        try {
            $this->ledger->close($date);
        } finally {
            $this->pdo->prepare('SELECT RELEASE_LOCK(?)')->execute(['day-close']);
        }
        return true;
    }
}
