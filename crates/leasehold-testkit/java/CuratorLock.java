// A Java service using Apache Curator's lock recipes, for the interop tests:
//   java -cp CURATOR_CLASSPATH CuratorLock.java CONNECT PATH HOLD_MS [RECIPE]
// RECIPE: mutex (InterProcessMutex, the default), read or write (InterProcessReadWriteLock's
// read or write lock), semaphore:N (InterProcessSemaphoreV2 with N leases).
// Prints "acquired NODE" once it holds, holds HOLD_MS, releases, prints "released";
// "timeout" (exit 2) when it got nothing within 30 s.
import java.util.concurrent.TimeUnit;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.locks.InterProcessReadWriteLock;
import org.apache.curator.framework.recipes.locks.InterProcessSemaphoreV2;
import org.apache.curator.framework.recipes.locks.Lease;
import org.apache.curator.retry.RetryOneTime;

public class CuratorLock {
    public static void main(String[] args) throws Exception {
        CuratorFramework client = CuratorFrameworkFactory.newClient(args[0], 10000, 5000, new RetryOneTime(100));
        client.start();
        String recipe = args.length > 3 ? args[3] : "mutex";
        long hold = Long.parseLong(args[2]);
        if (recipe.startsWith("semaphore:")) {
            int n = Integer.parseInt(recipe.substring("semaphore:".length()));
            InterProcessSemaphoreV2 sem = new InterProcessSemaphoreV2(client, args[1], n);
            Lease lease = sem.acquire(30, TimeUnit.SECONDS);
            if (lease == null) {
                timeout();
            }
            say("acquired " + lease.getNodeName());
            Thread.sleep(hold);
            sem.returnLease(lease);
        } else {
            InterProcessMutex lock;
            if (recipe.equals("mutex")) {
                lock = new InterProcessMutex(client, args[1]);
            } else {
                InterProcessReadWriteLock rw = new InterProcessReadWriteLock(client, args[1]);
                lock = recipe.equals("read") ? rw.readLock() : rw.writeLock();
            }
            if (!lock.acquire(30, TimeUnit.SECONDS)) {
                timeout();
            }
            String mine = null;
            for (String node : lock.getParticipantNodes()) {
                mine = mine == null ? node : mine;
            }
            say("acquired " + mine);
            Thread.sleep(hold);
            lock.release();
        }
        say("released");
        client.close();
    }

    static void say(String line) {
        System.out.println(line);
        System.out.flush();
    }

    static void timeout() {
        say("timeout");
        System.exit(2);
    }
}
