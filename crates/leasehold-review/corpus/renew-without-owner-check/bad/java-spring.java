// Reproduces: a @Scheduled renewer that calls redisTemplate.expire(lockKey, ...) without checking the value
// (once this instance's lease has lapsed and another instance holds the key, the renewer extends the
// other instance's lock), the unchecked-extend kind the Redlock "extend" guidance warns about.
package com.example.leader;

import java.time.Duration;
import java.util.UUID;
import org.springframework.data.redis.core.StringRedisTemplate;
import org.springframework.scheduling.annotation.Scheduled;
import org.springframework.stereotype.Component;

@Component
public class LeaderElection {
    private static final String LOCK_KEY = "lock:leader:billing";
    private static final Duration LEASE = Duration.ofSeconds(15);

    private final StringRedisTemplate redisTemplate;
    private final String instanceToken = UUID.randomUUID().toString();
    private volatile boolean leader;

    public LeaderElection(StringRedisTemplate redisTemplate) {
        this.redisTemplate = redisTemplate;
    }

    @Scheduled(fixedDelay = 5000)
    public void tick() {
        if (leader) {
            redisTemplate.expire(LOCK_KEY, LEASE); // expect: renew-without-owner-check
            return;
        }
        leader = Boolean.TRUE.equals(redisTemplate.opsForValue().setIfAbsent(LOCK_KEY, instanceToken, LEASE));
    }

    public void countRequest(String clientId) {
        // Not a lock: a rate-limit counter with a one-minute window.
        String counter = "ratelimit:" + clientId;
        Long hits = redisTemplate.opsForValue().increment(counter);
        if (hits != null && hits == 1L) {
            redisTemplate.expire(counter, Duration.ofMinutes(1));
        }
    }

    public boolean isLeader() {
        return leader;
    }
}
