// Reproduces: Spring Data Redis setIfAbsent(key, value) called without a timeout, so the lock key has no
// expiry (a pod killed mid-import never releases it and the nightly import stays locked out for good),
// the misuse the Spring/Redis locking write-ups warn about.
package com.example.imports;

import java.time.Duration;
import java.util.Collections;
import java.util.UUID;
import org.springframework.data.redis.core.StringRedisTemplate;
import org.springframework.data.redis.core.script.DefaultRedisScript;
import org.springframework.stereotype.Service;

@Service
public class CatalogImportService {
    private static final DefaultRedisScript<Long> RELEASE = new DefaultRedisScript<>(
        "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end",
        Long.class);

    private final StringRedisTemplate redisTemplate;
    private final CatalogImporter importer;

    public CatalogImportService(StringRedisTemplate redisTemplate, CatalogImporter importer) {
        this.redisTemplate = redisTemplate;
        this.importer = importer;
    }

    public boolean importCatalog(String supplier) {
        String lockKey = "lock:import:" + supplier;
        String owner = UUID.randomUUID().toString();
        Boolean acquired = redisTemplate.opsForValue().setIfAbsent(lockKey, owner); // expect: nx-without-expiry
        if (!Boolean.TRUE.equals(acquired)) {
            return false;
        }
        try {
            String summary = importer.run(supplier);
            // Cache writes, not locks: a plain SET with a TTL and a DELETE of the stale page.
            redisTemplate.opsForValue().set("cache:import-summary:" + supplier, summary, Duration.ofMinutes(10));
            redisTemplate.delete("cache:catalog-page:" + supplier);
        } finally {
            redisTemplate.execute(RELEASE, Collections.singletonList(lockKey), owner);
        }
        return true;
    }
}
