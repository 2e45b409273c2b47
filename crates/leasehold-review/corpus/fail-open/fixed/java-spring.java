// Fixed: the acquire's DataAccessException propagates, so no rebuild runs unless the lock was granted
// (fail closed); the scheduler logs it and tries again on the next tick. (Companion of bad/java-spring.java.)
package com.example.search;

import java.time.Duration;
import java.util.Collections;
import java.util.UUID;
import org.springframework.data.redis.core.StringRedisTemplate;
import org.springframework.data.redis.core.script.DefaultRedisScript;
import org.springframework.stereotype.Service;

@Service
public class IndexRebuilder {
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
        Boolean ok = redisTemplate.opsForValue().setIfAbsent(key, owner, Duration.ofMinutes(10));
        if (!Boolean.TRUE.equals(ok)) {
            return;
        }
        try {
            rebuild.run();
        } finally {
            redisTemplate.execute(RELEASE, Collections.singletonList(key), owner);
        }
    }
}
