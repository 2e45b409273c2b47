// Fixed: setIfAbsent(key, value, Duration) sends SET NX PX in one command, so the lock expires even if the
// pod dies mid-import. (Companion of bad/java-spring.java: setIfAbsent without a timeout.)
// The value is a per-acquire UUID and the release compares it in Lua.
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
        Boolean acquired = redisTemplate.opsForValue().setIfAbsent(lockKey, owner, Duration.ofMinutes(15));
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
