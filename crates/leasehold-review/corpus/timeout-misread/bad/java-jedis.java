// Reproduces: a socket timeout on SET NX caught and reported as "lock busy" (the SET may have reached Redis,
// so this node may hold a lock it will never release and nobody else gets for 60 s, while the caller
// reports contention that did not happen), the ambiguous-timeout point of Kleppmann's lock analysis.
package com.example.exports;

import java.util.Collections;
import java.util.UUID;
import redis.clients.jedis.JedisPooled;
import redis.clients.jedis.exceptions.JedisConnectionException;
import redis.clients.jedis.params.SetParams;

public class ExportGate {
    private static final String RELEASE_SCRIPT =
        "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

    private final JedisPooled jedis;

    public ExportGate(JedisPooled jedis) {
        this.jedis = jedis;
    }

    public boolean runExport(String customerId, Runnable export) {
        String key = "lock:export:" + customerId;
        String token = UUID.randomUUID().toString();
        try {
            if (!"OK".equals(jedis.set(key, token, SetParams.setParams().nx().px(60_000)))) {
                return false;
            }
        } catch (JedisConnectionException e) { // expect: timeout-misread
            return false;
        }
        try {
            export.run();
        } finally {
            jedis.eval(RELEASE_SCRIPT, Collections.singletonList(key), Collections.singletonList(token));
        }
        return true;
    }
}
