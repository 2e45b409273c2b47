//! What the library records through the `metrics` facade, read back from a recorder.

use std::future::IntoFuture;
use std::time::Duration;

use leasehold::telemetry::*;
use leasehold::{Error, Locker, Wait};
use leasehold_harness::metrics::TextRecorder;

fn on_sqlite<F: std::future::Future<Output = ()>>(rec: &TextRecorder, f: impl FnOnce(Locker) -> F) {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}/m.db", dir.path().display());
    // A current-thread runtime inside the local recorder's scope: every task it runs (the
    // auto-renew task included) records there.
    metrics::with_local_recorder(rec, || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let locker = Locker::connect(&url).await.unwrap();
            f(locker.clone()).await;
            locker.close().await.unwrap();
        });
    });
}

#[test]
fn grants_busy_waits_holds_renewals_and_losses_are_recorded() {
    let rec = TextRecorder::default();
    on_sqlite(&rec, |l| async move {
        let other = Locker::from_arc(l.store().clone());
        let a = l.acquire("k", Duration::from_secs(30)).await.unwrap();
        assert!(matches!(
            other.acquire("k", Duration::from_secs(30)).await,
            Err(Error::Busy { .. })
        ));
        a.renew().await.unwrap();
        // A waiter of the same locker, handed the key by a release.
        let waiter = tokio::spawn(
            l.acquire("k", Duration::from_secs(30))
                .wait(Wait::For(Duration::from_secs(10)))
                .into_future(),
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(a.release().await.unwrap().is_clean());
        let b = waiter.await.unwrap().unwrap();
        // Someone deletes b's grant: the next renewal answers not-owner and b is lost.
        assert!(l.release_by_owner("k", &b.owner()).await.unwrap());
        assert!(matches!(b.renew().await, Err(Error::NotOwner { .. })));
        assert!(!b.release().await.unwrap().is_clean());
    });
    let sqlite = [("backend", "sqlite")];
    assert_eq!(rec.counter(GRANTS, &sqlite), 2);
    assert_eq!(rec.counter(BUSY, &sqlite), 1);
    assert_eq!(rec.observations(ACQUIRE_WAIT, &[("outcome", "granted")]).len(), 2);
    assert_eq!(rec.observations(ACQUIRE_WAIT, &[("outcome", "busy")]).len(), 1);
    assert_eq!(rec.observations(HANDOFF_WAIT, &sqlite).len(), 1, "{}", rec.render());
    assert_eq!(rec.observations(RENEWAL, &[("outcome", "ok")]).len(), 1);
    assert_eq!(rec.observations(RENEWAL, &[("outcome", "not_owner")]).len(), 1);
    assert_eq!(rec.counter(RENEWAL_FAILURES, &sqlite), 1);
    assert_eq!(rec.counter(LOSSES, &[("reason", "not_owner")]), 1);
    assert_eq!(rec.observations(HOLD, &[("outcome", "released")]).len(), 1);
    assert_eq!(rec.observations(HOLD, &[("outcome", "lost")]).len(), 1);
    assert!(!rec.render().contains("key=\""), "keys are not labels unless asked for");
}

#[test]
fn the_key_label_is_opt_in() {
    let rec = TextRecorder::default();
    on_sqlite(&rec, |l| async move {
        let l = l.with_key_label(true);
        let a = l.acquire("invoice:42", Duration::from_secs(30)).await.unwrap();
        assert!(a.release().await.unwrap().is_clean());
    });
    assert_eq!(rec.counter(GRANTS, &[("backend", "sqlite"), ("key", "invoice:42")]), 1);
}
