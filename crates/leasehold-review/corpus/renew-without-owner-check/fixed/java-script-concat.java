// Reproduces: a heartbeat script written as Java string pieces (the Redisson style); fixed: the
// first piece compares the stored holder with ARGV[1], and the PEXPIRE in a later piece runs only
// for the holder, so a lapsed holder's heartbeat returns 0 and it stops.
import java.util.Collections;
import redis.clients.jedis.JedisPooled;

public class JobHeartbeat {
    private static final String EXTEND =
        "if redis.call('get', KEYS[1]) == ARGV[1] then " +
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
