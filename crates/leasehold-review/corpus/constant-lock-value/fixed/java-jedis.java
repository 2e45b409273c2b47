// Fixed: each acquire writes a fresh UUID, so the owner-checked release can only delete this acquire's lock.
// (Companion of bad/java-jedis.java: the host name as the lock value.) The host name is still kept
// for logging, but it is not the lock value.
package com.example.mailer;

import java.net.InetAddress;
import java.net.UnknownHostException;
import java.util.Collections;
import java.util.UUID;
import redis.clients.jedis.JedisPooled;
import redis.clients.jedis.params.SetParams;

public class DigestSender {
    private static final String RELEASE_SCRIPT =
        "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

    private final JedisPooled jedis;
    private final String host;

    public DigestSender(JedisPooled jedis) throws UnknownHostException {
        this.jedis = jedis;
        this.host = InetAddress.getLocalHost().getHostName();
    }

    public boolean sendDigest(String userId, Runnable send) {
        String key = "lock:digest:" + userId;
        String token = host + ":" + UUID.randomUUID();
        String reply = jedis.set(key, token, SetParams.setParams().nx().px(60_000));
        if (!"OK".equals(reply)) {
            return false;
        }
        try {
            send.run();
        } finally {
            jedis.eval(RELEASE_SCRIPT, Collections.singletonList(key), Collections.singletonList(token));
        }
        return true;
    }
}
