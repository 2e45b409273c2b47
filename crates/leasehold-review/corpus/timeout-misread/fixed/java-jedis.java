// Fixed: a failed SET NX is not turned into "busy": the exception propagates to the caller, which retries
// later; if the SET did land, the 60 s lease expires it. (Companion of bad/java-jedis.java.)
package com.example.exports;

import java.util.Collections;
import java.util.UUID;
import redis.clients.jedis.JedisPooled;
import redis.clients.jedis.params.SetParams;

public class ExportGate {
    private static final String RELEASE_SCRIPT =
        "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

    private final JedisPooled jedis;

    public ExportGate(JedisPooled jedis) {
        this.jedis = jedis;
    }

    /** @throws redis.clients.jedis.exceptions.JedisConnectionException when it is unknown whether the lock was taken */
    public boolean runExport(String customerId, Runnable export) {
        String key = "lock:export:" + customerId;
        String token = UUID.randomUUID().toString();
        if (!"OK".equals(jedis.set(key, token, SetParams.setParams().nx().px(60_000)))) {
            return false;
        }
        try {
            export.run();
        } finally {
            jedis.eval(RELEASE_SCRIPT, Collections.singletonList(key), Collections.singletonList(token));
        }
        return true;
    }
}
