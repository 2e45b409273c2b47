// Reproduces: a Redis outage during the acquire caught, logged and ignored, so every instance rebuilds the
// search index at once without the lock (fail-open: the lock protects nothing exactly when the store is
// unhealthy), the kind Kleppmann's lock analysis calls out for efficiency-vs-correctness locks.
package com.example.search;

import java.time.Duration;
import java.util.Collections;
import java.util.UUID;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.dao.DataAccessException;
import org.springframework.data.redis.core.StringRedisTemplate;
import org.springframework.data.redis.core.script.DefaultRedisScript;
import org.springframework.stereotype.Service;

@Service
public class IndexRebuilder {
    private static final Logger log = LoggerFactory.getLogger(IndexRebuilder.class);
    private static final DefaultRedisScript<Long> RELEASE = new DefaultRedisScript<>(
        "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end",
        Long.class);

    private final StringRedisTemplate redisTemplate;
    private final Runnable rebuild;

    public IndexRebuilder(StringRedisTemplate redisTemplate, Runnable rebuild) {
        this.redisTemplate = redisTemplate;
        this.rebuild = rebuild;
    }

    public void rebuildIfIdle(String index) {
        String key = "lock:rebuild:" + index;
        String owner = UUID.randomUUID().toString();
        boolean locked = false;
        try {
            Boolean ok = redisTemplate.opsForValue().setIfAbsent(key, owner, Duration.ofMinutes(10));
            if (!Boolean.TRUE.equals(ok)) {
                return;
            }
            locked = true;
        } catch (DataAccessException e) { // expect: fail-open
            log.warn("lock store unavailable, rebuilding {} anyway", index, e);
        }
        try {
            rebuild.run();
        } finally {
            if (locked) {
                redisTemplate.execute(RELEASE, Collections.singletonList(key), owner);
            }
        }
    }
}
