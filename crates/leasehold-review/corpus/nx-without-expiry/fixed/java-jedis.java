// Fixed: the lock is taken with SET key token NX EX 60 in one command, so the key can never exist without
// a TTL; the value is a per-acquire UUID and the release compares it in a Lua script.
// (Companion of bad/java-jedis.java: SETNX followed by a separate EXPIRE.)
package com.example.reports;

import java.util.Collections;
import java.util.UUID;
import redis.clients.jedis.Jedis;
import redis.clients.jedis.JedisPool;
import redis.clients.jedis.params.SetParams;

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
            String reply = jedis.set(key, token, SetParams.setParams().nx().ex(60));
            if (!"OK".equals(reply)) {
                return false;
            }
            try {
                job.run();
            } finally {
                jedis.eval(RELEASE_SCRIPT, Collections.singletonList(key), Collections.singletonList(token));
            }
            // Not a lock: the rendered report is cached for five minutes.
            jedis.setex("cache:report:" + reportId, 300, "ready");
            return true;
        }
    }
}
