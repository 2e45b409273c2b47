// Reproduces: a heartbeat script written as Java string pieces (the Redisson style) that extends
// the lock without comparing the holder: after A's lease lapsed and B acquired, A's heartbeat
// extends B's key and A keeps working as if it still held the lock.
import java.util.Collections;
import redis.clients.jedis.JedisPooled;

public class JobHeartbeat {
    private static final String EXTEND =
        "if redis.call('exists', KEYS[1]) == 1 then " + // expect: renew-without-owner-check
        "  return redis.call('pexpire', KEYS[1], ARGV[2]) " +
        "end " +
        "return 0";

    private final JedisPooled jedis;

    public JobHeartbeat(JedisPooled jedis) {
        this.jedis = jedis;
    }

    public boolean extendLock(String lockKey, String token, long ttlMillis) {
        Object r = jedis.eval(EXTEND, Collections.singletonList(lockKey),
            java.util.Arrays.asList(token, Long.toString(ttlMillis)));
        return Long.valueOf(1L).equals(r);
    }
}
