// Fixed: while holding the lock the poster takes a fence from INCR and the UPDATE only applies if its fence is
// newer than the last one written (`lock_fence < ?`), so a holder that outlived its lease cannot overwrite
// a newer holder's write. (Companion of bad/java-spring.java.)
package com.example.accounts;

import java.math.BigDecimal;
import java.time.Duration;
import java.util.Collections;
import java.util.UUID;
import org.springframework.data.redis.core.StringRedisTemplate;
import org.springframework.data.redis.core.script.DefaultRedisScript;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.stereotype.Service;

@Service
public class InterestPoster {
    private static final DefaultRedisScript<Long> RELEASE = new DefaultRedisScript<>(
        "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end",
        Long.class);

    private final StringRedisTemplate redisTemplate;
    private final JdbcTemplate jdbcTemplate;

    public InterestPoster(StringRedisTemplate redisTemplate, JdbcTemplate jdbcTemplate) {
        this.redisTemplate = redisTemplate;
        this.jdbcTemplate = jdbcTemplate;
    }

    public boolean post(long accountId, BigDecimal rate) {
        String key = "lock:account:" + accountId;
        String owner = UUID.randomUUID().toString();
        Boolean ok = redisTemplate.opsForValue().setIfAbsent(key, owner, Duration.ofSeconds(30));
        if (!Boolean.TRUE.equals(ok)) {
            return false;
        }
        try {
            Long fence = redisTemplate.opsForValue().increment("fence:account:" + accountId);
            BigDecimal balance = jdbcTemplate.queryForObject("SELECT balance FROM accounts WHERE id = ?", BigDecimal.class, accountId);
            int updated = jdbcTemplate.update(
                "UPDATE accounts SET balance = ?, lock_fence = ? WHERE id = ? AND lock_fence < ?",
                balance.multiply(rate), fence, accountId, fence);
            return updated == 1;
        } finally {
            redisTemplate.execute(RELEASE, Collections.singletonList(key), owner);
        }
    }
}
