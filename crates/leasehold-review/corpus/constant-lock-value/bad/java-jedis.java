// Reproduces: the lock value is the host name, set once in the constructor (two threads, or two containers
// sharing a hostname, write the same value, so the owner-checked release of one thread deletes the lock
// the other thread holds), the "value must be unique per acquire" point of the Redis locking pattern.
package com.example.mailer;

import java.net.InetAddress;
import java.net.UnknownHostException;
import java.util.Collections;
import redis.clients.jedis.JedisPooled;
import redis.clients.jedis.params.SetParams;

public class DigestSender {
    private static final String RELEASE_SCRIPT =
        "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

    private final JedisPooled jedis;
    private final String owner;

    public DigestSender(JedisPooled jedis) throws UnknownHostException {
        this.jedis = jedis;
        this.owner = InetAddress.getLocalHost().getHostName();
    }

    public boolean sendDigest(String userId, Runnable send) {
        String key = "lock:digest:" + userId;
        String reply = jedis.set(key, owner, SetParams.setParams().nx().px(60_000)); // expect: constant-lock-value
        if (!"OK".equals(reply)) {
            return false;
        }
        try {
            send.run();
        } finally {
            jedis.eval(RELEASE_SCRIPT, Collections.singletonList(key), Collections.singletonList(owner));
        }
        return true;
    }
}
