//! Conformance: one locker meeting its own grants: it never waits on itself (one task, a
//! `join!`, another task), a release is not a loss, and a dropped lease's background release
//! is waited for.

use std::time::Duration;

use leasehold::{Error, Locker, LostReason, Wait};

use super::support::{BOUND, LONG, assert_fence_after, other, unique_key, within};

/// A locker never waits on itself: the task holding a key that asks for it again, even
/// willing to wait, is answered at once with the grant's fence; another task of the same
/// locker waits its turn and gets the key when the holder releases it.
pub async fn no_self_wait(l: &Locker) {
    let key = unique_key("self-wait");
    let a = l.acquire(&key, LONG).await.unwrap();
    let again =
        within("self-wait", l.acquire(&key, LONG).wait(Wait::For(LONG)).into_future()).await;
    assert!(
        matches!(&again, Err(Error::HeldByThisLocker { fence, .. }) if *fence == a.fence()),
        "{again:?}"
    );
    // Waiting on itself is not "another owner holds it".
    assert!(!again.as_ref().unwrap_err().is_busy() && !again.as_ref().unwrap_err().is_retryable());
    let waiter = tokio::spawn(l.acquire(&key, LONG).wait(Wait::For(BOUND)).into_future());
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!waiter.is_finished(), "another task of the locker got a held key");
    let fence = a.fence();
    assert!(a.release().await.unwrap().is_clean());
    let b = within("waiter", waiter).await.unwrap().expect("the waiting task gets it");
    assert_fence_after(l, fence, b.fence());
    assert!(b.release().await.unwrap().is_clean());
}

/// Two acquires of one key joined in one task (`join!`) never wait on each other: one gets
/// the key, the other is answered `HeldByThisLocker` at once with that grant's fence, even
/// when both are willing to wait longer than the test allows.
pub async fn no_self_wait_in_join(l: &Locker) {
    let key = unique_key("self-wait-join");
    let both = async {
        tokio::join!(
            l.acquire(&key, LONG).wait(Wait::For(LONG)).into_future(),
            l.acquire(&key, LONG).wait(Wait::For(LONG)).into_future()
        )
    };
    let (held, refused) = match within("join! of two acquires", both).await {
        (Ok(held), Err(e)) | (Err(e), Ok(held)) => (held, e),
        other => panic!("expected one grant and one refusal: {other:?}"),
    };
    assert!(
        matches!(&refused, Error::HeldByThisLocker { fence, .. } if *fence == held.fence()),
        "{refused:?}"
    );
    // Queued behind a grant of another task, the same holds once this task's own grant lands.
    let other_task = tokio::spawn(l.acquire(&key, LONG).wait(Wait::For(BOUND)).into_future());
    assert!(held.release().await.unwrap().is_clean());
    let b = within("the other task", other_task).await.unwrap().expect("the other task gets it");
    let (c, d, ()) = within("join! queued behind another task", async {
        tokio::join!(
            l.acquire(&key, LONG).wait(Wait::For(LONG)).into_future(),
            l.acquire(&key, LONG).wait(Wait::For(LONG)).into_future(),
            async {
                tokio::time::sleep(Duration::from_millis(100)).await;
                assert!(b.release().await.unwrap().is_clean());
            }
        )
    })
    .await;
    let (held, refused) = match (c, d) {
        (Ok(held), Err(e)) | (Err(e), Ok(held)) => (held, e),
        other => panic!("expected one grant and one refusal: {other:?}"),
    };
    assert!(matches!(&refused, Error::HeldByThisLocker { .. }), "{refused:?}");
    assert!(held.release().await.unwrap().is_clean());
}

/// Two one-shot acquires of one key joined in one task: one gets the key, the other is
/// answered `HeldByThisLocker` with that grant's fence, as the waiting form is (issue 35:
/// it was `Busy`, "another owner", when the other owner was itself).
pub async fn no_self_wait_in_join_one_shot(l: &Locker) {
    let key = unique_key("self-wait-join-once");
    for round in 0..5 {
        let (a, b) = within("join! of two one-shot acquires", async {
            tokio::join!(l.acquire(&key, LONG).into_future(), l.acquire(&key, LONG).into_future())
        })
        .await;
        let (held, refused) = match (a, b) {
            (Ok(held), Err(e)) | (Err(e), Ok(held)) => (held, e),
            other => panic!("round {round}: expected one grant and one refusal: {other:?}"),
        };
        assert!(
            matches!(&refused, Error::HeldByThisLocker { fence, .. } if *fence == held.fence()),
            "round {round}: {refused:?}"
        );
        assert!(held.release().await.unwrap().is_clean());
    }
    // Another owner's grant is still busy, at once.
    let theirs = other(l).acquire(&key, LONG).await.unwrap();
    let busy = within("one-shot against another owner", l.acquire(&key, LONG).into_future()).await;
    assert!(matches!(&busy, Err(e) if e.is_busy()), "{busy:?}");
    assert!(theirs.release().await.unwrap().is_clean());
}

/// A normal release is not a loss: `lost()` stays pending after `release()` and after a drop,
/// while `ended()` resolves with `Released` (issue 35: a watcher alerting on `lost()` fired
/// at every normal end).
pub async fn release_is_not_a_loss(l: &Locker) {
    let key = unique_key("release-not-lost");
    for drop_it in [false, true] {
        let a = l.acquire(&key, LONG).await.unwrap();
        let lost = tokio::spawn(a.lost());
        let ended = a.ended();
        if drop_it {
            drop(a);
        } else {
            assert!(a.release().await.unwrap().is_clean());
        }
        assert_eq!(within("ended()", ended).await, LostReason::Released);
        tokio::time::sleep(Duration::from_millis(200)).await;
        assert!(!lost.is_finished(), "lost() fired on a normal end (dropped: {drop_it})");
        lost.abort();
        l.close().await.expect("nothing left in flight");
    }
}

/// A lease dropped without release is released in the background, and the same locker's
/// next one-shot acquire waits for that release instead of meeting its own grant.
pub async fn acquire_right_after_drop(l: &Locker) {
    let key = unique_key("drop-again");
    for round in 0..5 {
        let a = l.acquire(&key, LONG).await.unwrap();
        drop(a);
        let b = l.acquire(&key, LONG).await;
        let b = b.unwrap_or_else(|e| panic!("round {round}: right after a drop: {e}"));
        assert!(b.release().await.unwrap().is_clean());
    }
    l.close().await.expect("nothing left in flight");
}
