// Fixed: the release script compares the stored value with this holder's token (ARGV[1]) before deleting.
// (Companion of bad/java-lettuce.java: a Lua release that deletes KEYS[1] unconditionally.)
// Acquire is SET NX PX with a per-acquire UUID.
package com.example.ledger;

import io.lettuce.core.ScriptOutputType;
import io.lettuce.core.SetArgs;
import io.lettuce.core.api.sync.RedisCommands;
import java.util.UUID;

public class LedgerLock {
    private static final String RELEASE_SCRIPT =
        "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

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
