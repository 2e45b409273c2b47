<?php // Reproduces: MySQL GET_LOCK() run through PDO::query() and never fetched (GET_LOCK returns 0 after its
// timeout when another session holds the lock, and the day-close runs anyway), the unread
// try-lock kind the MySQL locking-functions docs (GET_LOCK returns 1, 0 or NULL) imply.

namespace App\Accounting;

final class DayCloser
{
    public function __construct(private \PDO $pdo, private Ledger $ledger)
    {
    }

    public function closeDay(string $date): void
    {
        $this->pdo->query("SELECT GET_LOCK('day-close', 10)"); // expect: unchecked-acquire
        try {
            $this->ledger->close($date);
        } finally {
            $this->pdo->query("SELECT RELEASE_LOCK('day-close')");
        }
    }
}
