// Reproduces: a command timeout on SET NX read as a grant ("it probably went through"): if the SET did not
// land, or landed for another client first, two nodes run the job; the ambiguous-timeout point of
// Kleppmann's lock analysis, misread the other way.
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
        try {
            return "OK".equals(commands.set("lock:billing:" + cycle, token, SetArgs.Builder.nx().px(120_000)));
        } catch (RedisCommandTimeoutException e) { // expect: timeout-misread
            return true;
        }
    }
}
