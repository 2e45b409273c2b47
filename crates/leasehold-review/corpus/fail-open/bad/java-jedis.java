// Reproduces: a JedisException around the acquire logged and swallowed, after which the cleanup runs as if
// locked (during a Redis failover every node purges at once), the fail-open kind Kleppmann's lock
// analysis calls out.
package com.example.retention;

import java.util.Collections;
import java.util.UUID;
import java.util.logging.Level;
import java.util.logging.Logger;
import redis.clients.jedis.JedisPooled;
import redis.clients.jedis.exceptions.JedisException;
import redis.clients.jedis.params.SetParams;

public class RetentionSweeper {
    private static final Logger LOG = Logger.getLogger(RetentionSweeper.class.getName());
    private static final String RELEASE_SCRIPT =
        "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

    private final JedisPooled jedis;
    private final Runnable purge;

    public RetentionSweeper(JedisPooled jedis, Runnable purge) {
        this.jedis = jedis;
        this.purge = purge;
    }

    public void sweep() {
        String key = "lock:retention-sweep";
        String token = UUID.randomUUID().toString();
        try {
            if (!"OK".equals(jedis.set(key, token, SetParams.setParams().nx().ex(300)))) {
                return;
            }
        } catch (JedisException e) { // expect: fail-open
            LOG.log(Level.WARNING, "could not take " + key + ", sweeping anyway", e);
        }
        try {
            purge.run();
        } finally {
            jedis.eval(RELEASE_SCRIPT, Collections.singletonList(key), Collections.singletonList(token));
        }
    }
}
