// Reproduces: GET, compare, then DEL in two commands (the lease can expire and another holder acquire
// between the GET and the DELETE, which then removes the new holder's lock), the check-then-delete
// race the Redis distributed-locks page says must be a single Lua script.
package com.example.payouts;

import java.time.Duration;
import java.util.UUID;
import org.springframework.data.redis.core.StringRedisTemplate;
import org.springframework.stereotype.Component;

@Component
public class PayoutLock {
    private final StringRedisTemplate redisTemplate;

    public PayoutLock(StringRedisTemplate redisTemplate) {
        this.redisTemplate = redisTemplate;
    }

    public String tryLock(String accountId) {
        String token = UUID.randomUUID().toString();
        Boolean ok = redisTemplate.opsForValue().setIfAbsent(key(accountId), token, Duration.ofSeconds(30));
        return Boolean.TRUE.equals(ok) ? token : null;
    }

    public void unlock(String accountId, String token) {
        String current = redisTemplate.opsForValue().get(key(accountId));
        if (token.equals(current)) {
            redisTemplate.delete(key(accountId)); // expect: release-without-owner-check
        }
    }

    public void evictCachedPayouts(String accountId) {
        // Not a lock: plain cache eviction.
        redisTemplate.delete("cache:payouts:" + accountId);
    }

    private static String key(String accountId) {
        return "lock:payout:" + accountId;
    }
}
