// Reproduces: SETNX followed by a separate EXPIRE, the pattern the Redis SETNX command page warns against
// (a crash, deploy or timeout between the two commands leaves a lock key with no TTL, so every later
// run of the report is refused until someone deletes the key by hand).
package com.example.reports;

import java.util.Collections;
import java.util.UUID;
import redis.clients.jedis.Jedis;
import redis.clients.jedis.JedisPool;

public class ReportLock {
    private static final String RELEASE_SCRIPT =
        "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

    private final JedisPool pool;

    public ReportLock(JedisPool pool) {
        this.pool = pool;
    }

    public boolean runExclusive(String reportId, Runnable job) {
        String key = "lock:report:" + reportId;
        String token = UUID.randomUUID().toString();
        try (Jedis jedis = pool.getResource()) {
            Long acquired = jedis.setnx(key, token); // expect: nx-without-expiry
            if (acquired == null || acquired != 1L) {
                return false;
            }
            jedis.expire(key, 60);
            try {
                job.run();
            } finally {
                jedis.eval(RELEASE_SCRIPT, Collections.singletonList(key), Collections.singletonList(token));
            }
            return true;
        }
    }
}
