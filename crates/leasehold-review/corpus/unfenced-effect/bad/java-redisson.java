// Reproduces: a Redisson RLock guarding a repository save() with no fencing token (the lease runs out during a
// long pause, another node takes the lock and saves, then the paused node's save lands on top), the
// fencing-token argument of Kleppmann's "How to do distributed locking".
package com.example.orders;

import java.util.concurrent.TimeUnit;
import org.redisson.api.RLock;
import org.redisson.api.RedissonClient;

public class OrderAllocator {
    private final RedissonClient redisson;
    private final OrderRepository orderRepository;

    public OrderAllocator(RedissonClient redisson, OrderRepository orderRepository) {
        this.redisson = redisson;
        this.orderRepository = orderRepository;
    }

    public boolean allocate(long orderId, String warehouse) throws InterruptedException {
        RLock lock = redisson.getLock("lock:order:" + orderId);
        if (!lock.tryLock(1, 20, TimeUnit.SECONDS)) { // expect: unfenced-effect
            return false;
        }
        try {
            Order order = orderRepository.findById(orderId).orElseThrow();
            order.setWarehouse(warehouse);
            orderRepository.save(order);
        } finally {
            lock.unlock();
        }
        return true;
    }
}
