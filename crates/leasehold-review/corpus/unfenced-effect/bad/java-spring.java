// Reproduces: a Redis lock guarding a read-modify-write UPDATE with no fencing token (a holder paused by GC past
// its 30 s lease wakes up and writes a balance computed from stale data over the next holder's write), the
// fencing-token argument of Kleppmann's "How to do distributed locking".
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
        Boolean ok = redisTemplate.opsForValue().setIfAbsent(key, owner, Duration.ofSeconds(30)); // expect: unfenced-effect
        if (!Boolean.TRUE.equals(ok)) {
            return false;
        }
        try {
            BigDecimal balance = jdbcTemplate.queryForObject("SELECT balance FROM accounts WHERE id = ?", BigDecimal.class, accountId);
            jdbcTemplate.update("UPDATE accounts SET balance = ? WHERE id = ?", balance.multiply(rate), accountId);
        } finally {
            redisTemplate.execute(RELEASE, Collections.singletonList(key), owner);
        }
        return true;
    }
}
