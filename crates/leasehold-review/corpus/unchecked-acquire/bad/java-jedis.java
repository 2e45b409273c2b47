// Reproduces: a helper returns whether SET NX succeeded and the caller drops the result (when another node
// holds the price lock the refresh runs anyway, and its finally-block release is a no-op), the
// "check the SET reply" point of the Redis locking pattern.
package com.example.pricing;

import java.util.Collections;
import java.util.UUID;
import redis.clients.jedis.JedisPooled;
import redis.clients.jedis.params.SetParams;

class LockSupport {
    private static final String RELEASE_SCRIPT =
        "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

    private final JedisPooled jedis;

    LockSupport(JedisPooled jedis) {
        this.jedis = jedis;
    }

    boolean tryAcquire(String key, String token, long ttlMillis) {
        return "OK".equals(jedis.set(key, token, SetParams.setParams().nx().px(ttlMillis)));
    }

    boolean release(String key, String token) {
        return Long.valueOf(1L).equals(jedis.eval(RELEASE_SCRIPT, Collections.singletonList(key), Collections.singletonList(token)));
    }
}

public class PriceRefresher {
    private final LockSupport locks;
    private final PriceFeed feed;

    public PriceRefresher(LockSupport locks, PriceFeed feed) {
        this.locks = locks;
        this.feed = feed;
    }

    public void refresh(String sku) {
        String key = "lock:price:" + sku;
        String token = UUID.randomUUID().toString();
        locks.tryAcquire(key, token, 30_000); // expect: unchecked-acquire
        try {
            feed.refresh(sku);
        } finally {
            locks.release(key, token);
        }
    }
}
