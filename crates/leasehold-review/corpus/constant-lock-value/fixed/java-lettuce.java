// Fixed: lock() writes a fresh UUID and returns it; unlock() compares that token, so threads in one JVM
// (same pid) cannot free each other's locks. (Companion of bad/java-lettuce.java: the pid as the value.)
package com.example.thumbnails;

import io.lettuce.core.ScriptOutputType;
import io.lettuce.core.SetArgs;
import io.lettuce.core.api.sync.RedisCommands;
import java.util.UUID;

public class ThumbnailLock {
    private static final String RELEASE_SCRIPT =
        "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

    private final RedisCommands<String, String> commands;

    public ThumbnailLock(RedisCommands<String, String> commands) {
        this.commands = commands;
    }

    /** Returns the owner token, or null when the image is locked by someone else. */
    public String lock(String imageId) {
        String token = UUID.randomUUID().toString();
        String reply = commands.set("lock:thumb:" + imageId, token, SetArgs.Builder.nx().ex(20));
        return "OK".equals(reply) ? token : null;
    }

    public boolean unlock(String imageId, String token) {
        Long n = commands.eval(RELEASE_SCRIPT, ScriptOutputType.INTEGER, new String[] {"lock:thumb:" + imageId}, token);
        return n != null && n == 1L;
    }
}
