// Reproduces: release through a generic RedisHelper.remove(key) that does a bare DEL (holder A's lease
// expires during a slow settlement, B acquires, A's finally-block DEL removes B's lock and a third
// worker enters), the unconditional-release kind the Redis distributed-locks page warns about.
package com.example.settlement;

import java.util.UUID;
import redis.clients.jedis.Jedis;
import redis.clients.jedis.JedisPool;
import redis.clients.jedis.params.SetParams;

class RedisHelper {
    private final JedisPool pool;

    RedisHelper(JedisPool pool) {
        this.pool = pool;
    }

    boolean putIfAbsent(String key, String value, long ttlMillis) {
        try (Jedis jedis = pool.getResource()) {
            return "OK".equals(jedis.set(key, value, SetParams.setParams().nx().px(ttlMillis)));
        }
    }

    boolean remove(String key) {
        try (Jedis jedis = pool.getResource()) {
            return jedis.del(key) > 0;
        }
    }
}

public class SettlementJob {
    private final RedisHelper redisHelper;
    private final Settler settler;

    public SettlementJob(RedisHelper redisHelper, Settler settler) {
        this.redisHelper = redisHelper;
        this.settler = settler;
    }

    public void settle(String merchantId) {
        String lockKey = "lock:settle:" + merchantId;
        if (!redisHelper.putIfAbsent(lockKey, UUID.randomUUID().toString(), 30_000)) {
            return;
        }
        try {
            settler.settle(merchantId);
        } finally {
            redisHelper.remove(lockKey); // expect: release-without-owner-check
        }
        // Not a lock: the merchant's cached balance is stale now.
        redisHelper.remove("cache:balance:" + merchantId);
    }
}
