// Reproduces: Lettuce setnx followed by a separate pexpire (two round trips: if the client times out or
// the JVM stops between them, the lock key is left without a TTL and the scheduler never runs the
// job again), the SETNX-then-EXPIRE pattern the Redis SETNX page calls unsafe.
package com.example.scheduler;

import io.lettuce.core.ScriptOutputType;
import io.lettuce.core.api.sync.RedisCommands;
import java.util.UUID;

public class JobLock {
    private static final String RELEASE_SCRIPT =
        "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

    private final RedisCommands<String, String> commands;

    public JobLock(RedisCommands<String, String> commands) {
        this.commands = commands;
    }

    /** Returns the owner token when the lock is taken, or null when another node holds it. */
    public String tryLock(String job, long leaseMillis) {
        String key = "lock:job:" + job;
        String token = UUID.randomUUID().toString();
        Boolean taken = commands.setnx(key, token); // expect: nx-without-expiry
        if (!Boolean.TRUE.equals(taken)) {
            return null;
        }
        commands.pexpire(key, leaseMillis);
        return token;
    }

    public boolean unlock(String job, String token) {
        Long deleted = commands.eval(RELEASE_SCRIPT, ScriptOutputType.INTEGER, new String[] {"lock:job:" + job}, token);
        return deleted != null && deleted == 1L;
    }
}
