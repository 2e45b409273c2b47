//! Scenarios that count what a locker sends to its store (through
//! [`leasehold_harness::counting::Counting`]) instead of timing it: they pin rates, such as
//! auto-renew's, without a timing assertion.

use std::time::Duration;

use leasehold::{LockKind, Locker};

use crate::conformance::unique_key;

/// Auto-renew runs every ttl/3, not more often: one lease held 6 s at ttl 3 s is renewed
/// about 6 times (3 per ttl), counted at the store; ten leases taken 100 ms apart, which
/// batching pulls together, are each renewed no more often. Not in the suite every store
/// runs (it takes 6 s): the store tests that pin the rate call it.
pub async fn auto_renew_rate(l: &Locker) {
    assert!(
        l.guarantees().kind == LockKind::Lease,
        "session and transaction locks are never renewed"
    );
    let counting = leasehold_harness::counting::Counting::new(l.store().clone());
    let locker = Locker::from_arc(counting.clone());
    let ttl = Duration::from_secs(3);
    let hold = Duration::from_secs(6);
    let key = unique_key("renew-rate");
    let lease = locker.acquire(&key, ttl).await.unwrap();
    tokio::time::sleep(hold).await;
    let one = counting.renewals();
    assert!(!lease.is_lost(), "the lease lapsed");
    assert!(
        (4..=7).contains(&one),
        "{one} renewals of one lease in {hold:?} at ttl {ttl:?}: auto-renew runs every ttl/3 \
         (6 expected)"
    );
    assert!(lease.release().await.unwrap().is_clean());
    let before = counting.renewals();
    let mut leases = Vec::new();
    for i in 0..10 {
        leases.push(locker.acquire(&unique_key(&format!("renew-rate-{i}")), ttl).await.unwrap());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(hold).await;
    let n = counting.renewals() - before;
    let per_lease = n as f64 / leases.len() as f64;
    for lease in leases {
        assert!(lease.release().await.unwrap().is_clean());
    }
    eprintln!(
        "auto-renew at ttl {ttl:?} over {hold:?}: one lease {one} renewals; ten leases \
         {per_lease:.1} per lease"
    );
    assert!(
        (4.0..=7.5).contains(&per_lease),
        "{per_lease:.1} renewals per lease in about {hold:?} at ttl {ttl:?} (6 or 7 expected: \
         one early renewal when batching aligns them)"
    );
}
