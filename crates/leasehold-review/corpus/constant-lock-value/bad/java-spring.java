// Reproduces: setIfAbsent(key, "locked", ttl) with a literal value (every holder writes the same string, so
// the owner check in the release cannot tell the current holder from a stale one whose lease expired),
// the "value must be unique per acquire" point of the Redis locking pattern.
package com.example.coupons;

import java.time.Duration;
import java.util.Collections;
import org.springframework.data.redis.core.StringRedisTemplate;
import org.springframework.data.redis.core.script.DefaultRedisScript;
import org.springframework.stereotype.Service;

@Service
public class CouponIssuer {
    private static final String LOCK_VALUE = "locked";
    private static final DefaultRedisScript<Long> RELEASE = new DefaultRedisScript<>(
        "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end",
        Long.class);

    private final StringRedisTemplate redisTemplate;

    public CouponIssuer(StringRedisTemplate redisTemplate) {
        this.redisTemplate = redisTemplate;
    }

    public boolean issueBatch(String campaignId, Runnable issue) {
        String key = "lock:coupons:" + campaignId;
        Boolean ok = redisTemplate.opsForValue().setIfAbsent(key, LOCK_VALUE, Duration.ofSeconds(30)); // expect: constant-lock-value
        if (!Boolean.TRUE.equals(ok)) {
            return false;
        }
        try {
            issue.run();
        } finally {
            redisTemplate.execute(RELEASE, Collections.singletonList(key), LOCK_VALUE);
        }
        return true;
    }
}
