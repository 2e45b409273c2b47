// Fixed: on a timeout the state of the lock is unknown, so tryAcquire checks it with GET: it holds the lock
// only if the key now carries this node's token; any other store error propagates.
// (Companion of bad/java-lettuce.java: a timeout read as a grant.)
package com.example.billing;

import io.lettuce.core.RedisCommandTimeoutException;
import io.lettuce.core.SetArgs;
import io.lettuce.core.api.sync.RedisCommands;

public class BillingRunLock {
    private final RedisCommands<String, String> commands;

    public BillingRunLock(RedisCommands<String, String> commands) {
        this.commands = commands;
    }

    /** True when this node should run the billing cycle. */
    public boolean tryAcquire(String cycle, String token) {
        String key = "lock:billing:" + cycle;
        try {
            return "OK".equals(commands.set(key, token, SetArgs.Builder.nx().px(120_000)));
        } catch (RedisCommandTimeoutException e) {
            // The SET may or may not have been applied: ask Redis who holds the key now.
            return token.equals(commands.get(key));
        }
    }
}
