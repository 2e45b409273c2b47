// Fixed: the try-lock's boolean is read from the ResultSet and the migration is skipped when it is false;
// lock and unlock use the same dedicated Connection. (Companion of bad/java-jdbc.java.)
package com.example.migrations;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import javax.sql.DataSource;

public class SchemaMigrator {
    private static final long MIGRATION_LOCK_ID = 42L;

    private final DataSource dataSource;
    private final Runnable migrate;

    public SchemaMigrator(DataSource dataSource, Runnable migrate) {
        this.dataSource = dataSource;
        this.migrate = migrate;
    }

    public boolean migrate() throws SQLException {
        try (Connection conn = dataSource.getConnection()) {
            try (PreparedStatement lock = conn.prepareStatement("SELECT pg_try_advisory_lock(?)")) {
                lock.setLong(1, MIGRATION_LOCK_ID);
                try (ResultSet rs = lock.executeQuery()) {
                    if (!rs.next() || !rs.getBoolean(1)) {
                        return false;
                    }
                }
            }
            try {
                migrate.run();
            } finally {
                try (PreparedStatement unlock = conn.prepareStatement("SELECT pg_advisory_unlock(?)")) {
                    unlock.setLong(1, MIGRATION_LOCK_ID);
                    unlock.executeQuery().close();
                }
            }
            return true;
        }
    }
}
