// A Java service using Apache Curator's InterProcessMutex, for the interop test:
//   java -cp CURATOR_CLASSPATH CuratorLock.java CONNECT PATH HOLD_MS
// prints "acquired NODE" once it holds the lock, holds it HOLD_MS, releases, prints "released".
import java.util.concurrent.TimeUnit;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.retry.RetryOneTime;

public class CuratorLock {
    public static void main(String[] args) throws Exception {
        CuratorFramework client = CuratorFrameworkFactory.newClient(args[0], 10000, 5000, new RetryOneTime(100));
        client.start();
        InterProcessMutex lock = new InterProcessMutex(client, args[1]);
        if (!lock.acquire(30, TimeUnit.SECONDS)) {
            System.out.println("timeout");
            System.exit(2);
        }
        System.out.println("acquired " + lock.getParticipantNodes().iterator().next());
        System.out.flush();
        Thread.sleep(Long.parseLong(args[2]));
        lock.release();
        System.out.println("released");
        System.out.flush();
        client.close();
    }
}
