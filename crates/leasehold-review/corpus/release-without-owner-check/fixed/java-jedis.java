// Fixed: the release runs a Lua script that deletes the key only if it still holds this acquire's UUID,
// so a holder whose lease expired cannot delete its successor's lock. (Companion of bad/java-jedis.java.)
// forceRelease is a deliberate operator tool that breaks a stuck lock: not a finding.
package com.example.settlement;

import java.util.Collections;
import java.util.UUID;
import redis.clients.jedis.Jedis;
import redis.clients.jedis.JedisPool;
import redis.clients.jedis.params.SetParams;

public class SettlementJob {
    private static final String RELEASE_SCRIPT =
        "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

    private final JedisPool pool;
    private final Settler settler;

    public SettlementJob(JedisPool pool, Settler settler) {
        this.pool = pool;
        this.settler = settler;
    }

    public void settle(String merchantId) {
        String lockKey = "lock:settle:" + merchantId;
        String token = UUID.randomUUID().toString();
        try (Jedis jedis = pool.getResource()) {
            if (!"OK".equals(jedis.set(lockKey, token, SetParams.setParams().nx().px(30_000)))) {
                return;
            }
            try {
                settler.settle(merchantId);
            } finally {
                jedis.eval(RELEASE_SCRIPT, Collections.singletonList(lockKey), Collections.singletonList(token));
            }
            // Not a lock: the merchant's cached balance is stale now.
            jedis.del("cache:balance:" + merchantId);
        }
    }

    /** Operator tool behind the admin console: breaks a lock left by a wedged worker. */
    public void forceRelease(String merchantId) {
        try (Jedis jedis = pool.getResource()) {
            jedis.del("lock:settle:" + merchantId);
        }
    }
}
