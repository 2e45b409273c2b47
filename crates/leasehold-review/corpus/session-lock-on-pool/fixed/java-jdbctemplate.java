// Fixed: a transaction-level pg_try_advisory_xact_lock inside @Transactional: JdbcTemplate uses the
// transaction's single connection, and PostgreSQL releases the lock at commit or rollback, so no unlock
// can land on another pooled session. (Companion of bad/java-jdbctemplate.java.)
package com.example.ledger;

import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.stereotype.Service;
import org.springframework.transaction.annotation.Transactional;

@Service
public class PeriodCloser {
    private final JdbcTemplate jdbcTemplate;
    private final ClosingSteps steps;

    public PeriodCloser(JdbcTemplate jdbcTemplate, ClosingSteps steps) {
        this.jdbcTemplate = jdbcTemplate;
        this.steps = steps;
    }

    @Transactional
    public boolean closePeriod(long ledgerId) {
        Boolean locked = jdbcTemplate.queryForObject("SELECT pg_try_advisory_xact_lock(?)", Boolean.class, ledgerId);
        if (!Boolean.TRUE.equals(locked)) {
            return false;
        }
        steps.run(ledgerId);
        return true;
    }
}
