// Fixed: tryLock's result decides whether the reconcile runs; unlock() (owner-checked by Redisson) only when
// held. (Companion of bad/java-redisson.java: tryLock as a bare statement.) breakLock uses forceUnlock(),
// the deliberate operator override: not a finding.
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

    public boolean reconcile(String warehouse) throws InterruptedException {
        RLock lock = redisson.getLock("lock:reconcile:" + warehouse);
        if (!lock.tryLock(2, 60, TimeUnit.SECONDS)) {
            return false;
        }
        try {
            reconcileAll.run();
        } finally {
            if (lock.isHeldByCurrentThread()) {
                lock.unlock();
            }
        }
        return true;
    }

    /** Admin endpoint: an operator breaks a lock left by a node that was shut down mid-reconcile. */
    public boolean breakLock(String warehouse) {
        return redisson.getLock("lock:reconcile:" + warehouse).forceUnlock();
    }
}
