// Fixed: a JedisException from the acquire propagates and the purge does not run without the lock (fail
// closed). (Companion of bad/java-jedis.java: the exception logged and swallowed.)
package com.example.retention;

import java.util.Collections;
import java.util.UUID;
import redis.clients.jedis.JedisPooled;
import redis.clients.jedis.params.SetParams;

public class RetentionSweeper {
    private static final String RELEASE_SCRIPT =
        "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

    private final JedisPooled jedis;
    private final Runnable purge;

    public RetentionSweeper(JedisPooled jedis, Runnable purge) {
        this.jedis = jedis;
        this.purge = purge;
    }

    public void sweep() {
        String key = "lock:retention-sweep";
        String token = UUID.randomUUID().toString();
        if (!"OK".equals(jedis.set(key, token, SetParams.setParams().nx().ex(300)))) {
            return;
        }
        try {
            purge.run();
        } finally {
            jedis.eval(RELEASE_SCRIPT, Collections.singletonList(key), Collections.singletonList(token));
        }
    }
}
