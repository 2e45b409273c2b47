// Reproduces: a session-level pg_try_advisory_lock taken and released through two JdbcTemplate calls, each of
// which borrows whatever pooled connection is free (the unlock runs on another session and fails; the lock stays
// held by an idle pooled connection), the kind the PostgreSQL advisory-lock docs (session locks) warn about.
package com.example.ledger;

import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.stereotype.Service;

@Service
public class PeriodCloser {
    private final JdbcTemplate jdbcTemplate;
    private final ClosingSteps steps;

    public PeriodCloser(JdbcTemplate jdbcTemplate, ClosingSteps steps) {
        this.jdbcTemplate = jdbcTemplate;
        this.steps = steps;
    }

    public boolean closePeriod(long ledgerId) {
        Boolean locked = jdbcTemplate.queryForObject("SELECT pg_try_advisory_lock(?)", Boolean.class, ledgerId); // expect: session-lock-on-pool
        if (!Boolean.TRUE.equals(locked)) {
            return false;
        }
        try {
            steps.run(ledgerId);
        } finally {
            jdbcTemplate.execute("SELECT pg_advisory_unlock(" + ledgerId + ")"); // expect: session-lock-on-pool
        }
        return true;
    }
}
