// Fixed: Redisson's RFencedLock hands out a monotonically increasing fencing token with the lock, and the
// repository write is conditional on it (rejected when a newer holder already wrote).
// (Companion of bad/java-redisson.java: an RLock guarding save() with no fence.)
package com.example.orders;

import java.util.concurrent.TimeUnit;
import org.redisson.api.RFencedLock;
import org.redisson.api.RedissonClient;

public class OrderAllocator {
    private final RedissonClient redisson;
    private final OrderRepository orderRepository;

    public OrderAllocator(RedissonClient redisson, OrderRepository orderRepository) {
        this.redisson = redisson;
        this.orderRepository = orderRepository;
    }

    public boolean allocate(long orderId, String warehouse) throws InterruptedException {
        RFencedLock lock = redisson.getFencedLock("lock:order:" + orderId);
        Long fencingToken = lock.tryLockAndGetToken(1, 20, TimeUnit.SECONDS);
        if (fencingToken == null) {
            return false;
        }
        try {
            // UPDATE orders SET warehouse = ?, fence = ? WHERE id = ? AND fence < ?
            int updated = orderRepository.updateWarehouseIfNewer(orderId, warehouse, fencingToken);
            return updated == 1;
        } finally {
            lock.unlock();
        }
    }
}
