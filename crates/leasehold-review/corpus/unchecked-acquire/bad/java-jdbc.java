// Reproduces: pg_try_advisory_lock executed with Statement.execute() and its boolean never read (when another
// node holds the lock the function returns false, and the migration runs anyway), the unread
// try-lock kind the PostgreSQL advisory-lock docs (pg_try_advisory_lock "returns true/false") imply.
package com.example.migrations;

import java.sql.Connection;
import java.sql.SQLException;
import java.sql.Statement;
import javax.sql.DataSource;

public class SchemaMigrator {
    private static final long MIGRATION_LOCK_ID = 42L;

    private final DataSource dataSource;
    private final Runnable migrate;

    public SchemaMigrator(DataSource dataSource, Runnable migrate) {
        this.dataSource = dataSource;
        this.migrate = migrate;
    }

    public void migrate() throws SQLException {
        try (Connection conn = dataSource.getConnection(); Statement stmt = conn.createStatement()) {
            stmt.execute("SELECT pg_try_advisory_lock(42)"); // expect: unchecked-acquire
            try {
                migrate.run();
            } finally {
                stmt.execute("SELECT pg_advisory_unlock(" + MIGRATION_LOCK_ID + ")");
            }
        }
    }
}
