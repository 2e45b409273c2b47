// Fixed: the value is a per-acquire UUID, so the Lua release deletes only this acquire's lock.
// (Companion of bad/java-spring.java: the literal "locked" as the lock value.)
package com.example.coupons;

import java.time.Duration;
import java.util.Collections;
import java.util.UUID;
import org.springframework.data.redis.core.StringRedisTemplate;
import org.springframework.data.redis.core.script.DefaultRedisScript;
import org.springframework.stereotype.Service;

@Service
public class CouponIssuer {
    private static final DefaultRedisScript<Long> RELEASE = new DefaultRedisScript<>(
        "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end",
        Long.class);

    private final StringRedisTemplate redisTemplate;

    public CouponIssuer(StringRedisTemplate redisTemplate) {
        this.redisTemplate = redisTemplate;
    }

    public boolean issueBatch(String campaignId, Runnable issue) {
        String key = "lock:coupons:" + campaignId;
        String owner = UUID.randomUUID().toString();
        Boolean ok = redisTemplate.opsForValue().setIfAbsent(key, owner, Duration.ofSeconds(30));
        if (!Boolean.TRUE.equals(ok)) {
            return false;
        }
        try {
            issue.run();
        } finally {
            redisTemplate.execute(RELEASE, Collections.singletonList(key), owner);
        }
        return true;
    }
}
