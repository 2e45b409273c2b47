// Fixed: the heartbeat extends the lease with a Lua script that PEXPIREs only while the key still holds this
// node's token, and stops (marking the lease lost) as soon as the script says it does not.
// (Companion of bad/java-jedis.java: a bare PEXPIRE heartbeat.)
package com.example.indexer;

import java.util.Arrays;
import java.util.Collections;
import java.util.UUID;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import redis.clients.jedis.JedisPooled;
import redis.clients.jedis.params.SetParams;

public class IndexerLease implements AutoCloseable {
    private static final long LEASE_MS = 30_000;
    private static final String RELEASE_SCRIPT =
        "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";
    private static final String EXTEND_SCRIPT =
        "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) else return 0 end";

    private final JedisPooled jedis;
    private final ScheduledExecutorService heartbeat = Executors.newSingleThreadScheduledExecutor();
    private final String key;
    private final String token = UUID.randomUUID().toString();
    private volatile boolean lost;
    private ScheduledFuture<?> renewal;

    public IndexerLease(JedisPooled jedis, String index) {
        this.jedis = jedis;
        this.key = "lock:indexer:" + index;
    }

    public boolean acquire() {
        if (!"OK".equals(jedis.set(key, token, SetParams.setParams().nx().px(LEASE_MS)))) {
            return false;
        }
        renewal = heartbeat.scheduleAtFixedRate(this::renew, LEASE_MS / 3, LEASE_MS / 3, TimeUnit.MILLISECONDS);
        return true;
    }

    private void renew() {
        Object extended = jedis.eval(EXTEND_SCRIPT, Collections.singletonList(key), Arrays.asList(token, String.valueOf(LEASE_MS)));
        if (!Long.valueOf(1L).equals(extended)) {
            lost = true;
            renewal.cancel(false);
        }
    }

    public boolean isLost() {
        return lost;
    }

    @Override
    public void close() {
        renewal.cancel(false);
        heartbeat.shutdown();
        jedis.eval(RELEASE_SCRIPT, Collections.singletonList(key), Collections.singletonList(token));
    }
}
