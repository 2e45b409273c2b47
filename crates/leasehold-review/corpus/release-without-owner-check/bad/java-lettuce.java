// Reproduces: a Lua "release" script kept in a constant that deletes KEYS[1] without comparing ARGV[1]
// (being a script makes it atomic but not owner-checked: a holder whose lease ran out still deletes
// the next holder's lock), the unconditional-release kind the Redis distributed-locks page warns about.
package com.example.ledger;

import io.lettuce.core.ScriptOutputType;
import io.lettuce.core.SetArgs;
import io.lettuce.core.api.sync.RedisCommands;
import java.util.UUID;

public class LedgerLock {
    private static final String RELEASE_SCRIPT = "return redis.call('del', KEYS[1])"; // expect: release-without-owner-check

    private final RedisCommands<String, String> commands;

    public LedgerLock(RedisCommands<String, String> commands) {
        this.commands = commands;
    }

    public String acquire(String ledgerId) {
        String token = UUID.randomUUID().toString();
        String reply = commands.set("lock:ledger:" + ledgerId, token, SetArgs.Builder.nx().px(20_000));
        return "OK".equals(reply) ? token : null;
    }

    public boolean release(String ledgerId, String token) {
        Long n = commands.eval(RELEASE_SCRIPT, ScriptOutputType.INTEGER, new String[] {"lock:ledger:" + ledgerId}, token);
        return n != null && n == 1L;
    }
}
