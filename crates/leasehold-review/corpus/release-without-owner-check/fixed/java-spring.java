// Fixed: the compare and the delete run atomically in one Lua script through DefaultRedisScript, so a
// lease that expired between them cannot make this holder delete a successor's lock.
// (Companion of bad/java-spring.java: GET-compare-then-DELETE.)
package com.example.payouts;

import java.time.Duration;
import java.util.Collections;
import java.util.UUID;
import org.springframework.data.redis.core.StringRedisTemplate;
import org.springframework.data.redis.core.script.DefaultRedisScript;
import org.springframework.stereotype.Component;

@Component
public class PayoutLock {
    private static final DefaultRedisScript<Long> RELEASE = new DefaultRedisScript<>(
        "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end",
        Long.class);

    private final StringRedisTemplate redisTemplate;

    public PayoutLock(StringRedisTemplate redisTemplate) {
        this.redisTemplate = redisTemplate;
    }

    public String tryLock(String accountId) {
        String token = UUID.randomUUID().toString();
        Boolean ok = redisTemplate.opsForValue().setIfAbsent(key(accountId), token, Duration.ofSeconds(30));
        return Boolean.TRUE.equals(ok) ? token : null;
    }

    public boolean unlock(String accountId, String token) {
        Long deleted = redisTemplate.execute(RELEASE, Collections.singletonList(key(accountId)), token);
        return deleted != null && deleted == 1L;
    }

    public void evictCachedPayouts(String accountId) {
        // Not a lock: plain cache eviction.
        redisTemplate.delete("cache:payouts:" + accountId);
    }

    private static String key(String accountId) {
        return "lock:payout:" + accountId;
    }
}
