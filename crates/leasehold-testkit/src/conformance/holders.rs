//! Conformance: who holds a key, as `holders` shows it (owner, fence, holder info).

use std::time::Duration;

use leasehold::{HolderInfo, Locker, OwnerToken};

use super::support::{LONG, assert_holder_fence, is_lease, other, unique_key};

/// `holders` shows the current grant with its owner and fence, and forgets it on release.
pub async fn holders_lists_grant(l: &Locker) {
    let key = unique_key("holders");
    let a = l.acquire(&key, LONG).await.unwrap();
    let h = l.holders(Some(&key)).await.unwrap();
    assert_eq!(h.len(), 1);
    assert_eq!((&h[0].key.to_string(), h[0].owner), (&key, a.owner()));
    assert_holder_fence(&h[0], a.fence());
    match h[0].expires_in {
        Some(left) => assert!(is_lease(l) && left <= LONG),
        None => assert!(!is_lease(l)),
    }
    let all = l.holders(None).await.unwrap();
    assert!(all.iter().any(|x| x.owner == a.owner()));
    assert!(a.release().await.unwrap().is_clean());
    assert!(l.holders(Some(&key)).await.unwrap().is_empty());
}

/// Who holds a key: the [`HolderInfo`] a locker writes at acquire comes back from `holders`
/// (asked through another locker on the store), unchanged after renewals, on every store
/// whose guarantees say it keeps it; a locker that records none shows none (no earlier
/// holder's info lingers). A store that cannot keep it must say so and show none.
pub async fn holders_show_who_holds(l: &Locker) {
    let keeps = l.guarantees().holders_know_info;
    let me = HolderInfo::this_process().with_command("conformance: holders_show_who_holds");
    let writer = l.clone().with_holder_info(Some(me.clone()));
    let reader = other(l);
    let key = unique_key("holder-info");
    let ttl = Duration::from_millis(1500);
    let info_of = async |owner: OwnerToken| {
        let found = reader.holders(Some(&key)).await.expect("holders");
        let h = found.into_iter().find(|h| h.owner == owner).expect("the grant is listed");
        h.info
    };
    let want = keeps.then(|| me.clone());
    let a = writer.acquire(&key, ttl).await.unwrap();
    assert_eq!(info_of(a.owner()).await, want, "holder info after the grant (keeps: {keeps})");
    // Several renewals (every ttl/3): the info lives as long as the grant.
    tokio::time::sleep(ttl * 2).await;
    assert!(!a.is_lost(), "the lease must survive its renewals");
    assert_eq!(info_of(a.owner()).await, want, "holder info after renewals (keeps: {keeps})");
    assert!(a.release().await.unwrap().is_clean());
    let anonymous = l.clone().with_holder_info(None);
    let b = anonymous.acquire(&key, ttl).await.unwrap();
    assert_eq!(info_of(b.owner()).await, None, "a grant without holder info shows none");
    assert!(b.release().await.unwrap().is_clean());
}
