// Reproduces: the setIfAbsent reply tested with `!= null` (Spring returns Boolean.FALSE, not null, when the
// key exists, so every caller "acquires"), the "check the SET reply" point of the Redis locking pattern.
package com.example.notifications;

import java.time.Duration;
import java.util.Collections;
import java.util.UUID;
import org.springframework.data.redis.core.StringRedisTemplate;
import org.springframework.data.redis.core.script.DefaultRedisScript;
import org.springframework.stereotype.Service;

@Service
public class PushFanout {
    private static final DefaultRedisScript<Long> RELEASE = new DefaultRedisScript<>(
        "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end",
        Long.class);

    private final StringRedisTemplate redisTemplate;
    private final PushGateway gateway;

    public PushFanout(StringRedisTemplate redisTemplate, PushGateway gateway) {
        this.redisTemplate = redisTemplate;
        this.gateway = gateway;
    }

    public void fanout(String campaignId) {
        String key = "lock:fanout:" + campaignId;
        String owner = UUID.randomUUID().toString();
        Boolean ok = redisTemplate.opsForValue().setIfAbsent(key, owner, Duration.ofMinutes(5)); // expect: unchecked-acquire
        if (ok != null) {
            try {
                gateway.sendCampaign(campaignId);
            } finally {
                redisTemplate.execute(RELEASE, Collections.singletonList(key), owner);
            }
        }
    }
}
