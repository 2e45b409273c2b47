// Fixed: the renewer extends the lease with a compare-and-pexpire Lua script and steps down when the key no
// longer holds this instance's token. (Companion of bad/java-spring.java: a bare expire() renewer.)
// The rate-limit counter's EXPIRE is not a lock renewal.
package com.example.leader;

import java.time.Duration;
import java.util.Collections;
import java.util.UUID;
import org.springframework.data.redis.core.StringRedisTemplate;
import org.springframework.data.redis.core.script.DefaultRedisScript;
import org.springframework.scheduling.annotation.Scheduled;
import org.springframework.stereotype.Component;

@Component
public class LeaderElection {
    private static final String LOCK_KEY = "lock:leader:billing";
    private static final Duration LEASE = Duration.ofSeconds(15);
    private static final DefaultRedisScript<Long> EXTEND = new DefaultRedisScript<>(
        "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) else return 0 end",
        Long.class);

    private final StringRedisTemplate redisTemplate;
    private final String instanceToken = UUID.randomUUID().toString();
    private volatile boolean leader;

    public LeaderElection(StringRedisTemplate redisTemplate) {
        this.redisTemplate = redisTemplate;
    }

    @Scheduled(fixedDelay = 5000)
    public void tick() {
        if (leader) {
            Long extended = redisTemplate.execute(EXTEND, Collections.singletonList(LOCK_KEY),
                instanceToken, String.valueOf(LEASE.toMillis()));
            leader = extended != null && extended == 1L;
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
