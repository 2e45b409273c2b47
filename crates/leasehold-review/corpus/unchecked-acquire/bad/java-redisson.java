// Reproduces: Redisson tryLock(wait, lease, unit) called as a bare statement (after the 2 s wait it returns
// false and the reconcile runs unlocked; unlock() then throws IllegalMonitorStateException), the
// unchecked tryLock kind Redisson's own docs show guarded by `if (lock.tryLock(...))`.
package com.example.inventory;

import java.util.concurrent.TimeUnit;
import org.redisson.api.RLock;
import org.redisson.api.RedissonClient;

public class StockReconciler {
    private final RedissonClient redisson;
    private final Runnable reconcileAll;

    public StockReconciler(RedissonClient redisson, Runnable reconcileAll) {
        this.redisson = redisson;
        this.reconcileAll = reconcileAll;
    }

    public void reconcile(String warehouse) throws InterruptedException {
        RLock lock = redisson.getLock("lock:reconcile:" + warehouse);
        lock.tryLock(2, 60, TimeUnit.SECONDS); // expect: unchecked-acquire
        try {
            reconcileAll.run();
        } finally {
            lock.unlock();
        }
    }
}
