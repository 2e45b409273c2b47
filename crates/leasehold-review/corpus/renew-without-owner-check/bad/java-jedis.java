// Reproduces: a heartbeat thread that extends the lock with a bare PEXPIRE (after a GC pause longer than the
// lease, another node owns the key, and this heartbeat keeps extending that node's lock while this node
// believes it still holds it), the unchecked-extend kind the Redlock "extend" guidance warns about.
package com.example.indexer;

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

    private final JedisPooled jedis;
    private final ScheduledExecutorService heartbeat = Executors.newSingleThreadScheduledExecutor();
    private final String key;
    private final String token = UUID.randomUUID().toString();
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
        jedis.pexpire(key, LEASE_MS); // expect: renew-without-owner-check
    }

    @Override
    public void close() {
        renewal.cancel(false);
        heartbeat.shutdown();
        jedis.eval(RELEASE_SCRIPT, Collections.singletonList(key), Collections.singletonList(token));
    }
}
