// Reproduces: the process id as the lock value (all threads of the JVM share it, and pids repeat across
// containers, so one thread's owner-checked release frees a lock another thread holds), the
// "value must be unique per acquire" point of the Redis locking pattern.
package com.example.thumbnails;

import io.lettuce.core.ScriptOutputType;
import io.lettuce.core.SetArgs;
import io.lettuce.core.api.sync.RedisCommands;

public class ThumbnailLock {
    private static final String RELEASE_SCRIPT =
        "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

    private final RedisCommands<String, String> commands;

    public ThumbnailLock(RedisCommands<String, String> commands) {
        this.commands = commands;
    }

    public boolean lock(String imageId) {
        String pid = String.valueOf(ProcessHandle.current().pid());
        String reply = commands.set("lock:thumb:" + imageId, pid, SetArgs.Builder.nx().ex(20)); // expect: constant-lock-value
        return "OK".equals(reply);
    }

    public void unlock(String imageId) {
        String pid = String.valueOf(ProcessHandle.current().pid());
        commands.eval(RELEASE_SCRIPT, ScriptOutputType.INTEGER, new String[] {"lock:thumb:" + imageId}, pid);
    }
}
