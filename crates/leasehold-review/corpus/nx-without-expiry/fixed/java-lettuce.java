// Fixed: SET key token NX PX lease in one command through SetArgs, so there is no window in which the key
// exists without a TTL. (Companion of bad/java-lettuce.java: setnx then pexpire.)
// Release compares the owner token in Lua.
package com.example.scheduler;

import io.lettuce.core.ScriptOutputType;
import io.lettuce.core.SetArgs;
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
        String reply = commands.set(key, token, SetArgs.Builder.nx().px(leaseMillis));
        if (!"OK".equals(reply)) {
            return null;
        }
        return token;
    }

    public boolean unlock(String job, String token) {
        Long deleted = commands.eval(RELEASE_SCRIPT, ScriptOutputType.INTEGER, new String[] {"lock:job:" + job}, token);
        return deleted != null && deleted == 1L;
    }
}
