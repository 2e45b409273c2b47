//! How a private store fails in `leasehold chaos`'s `store-kill` and `failover` scenarios:
//! the [`FailingStore`] each store's server implements and the [`Plan`] that starts one
//! (each store's folder under [`crate::stores`] has its own; [`crate::stores::plan`] picks the
//! one a store URL's scheme names).

/// A private store started for one store-failure trial, and how it fails. Every method
/// blocks until the server has done it.
pub trait FailingStore: Send {
    /// The store URL, with `suffix` (path and options from the user's URL).
    fn url(&self, suffix: &str) -> String;
    /// Kills the store (-9).
    fn kill9(&mut self);
    /// Restarts it on its port and data directory.
    fn restart(&mut self);
    /// Whether it has a replica that must miss the holder's grant (`failover`).
    fn replicated(&self) -> bool {
        false
    }
    /// Whether [`FailingStore::cut_replica`] must wait until the holder's store is open (a
    /// replica frozen by the cut would hold up a cluster client connecting to every node);
    /// otherwise the replica is cut before the holder starts.
    fn cut_after_connect(&self) -> bool {
        false
    }
    /// After a warm-up grant and before the holder's grant: lets the replica take the
    /// warm-up grant, then stops it following, so that it misses what comes next (`suffix`
    /// as for [`FailingStore::url`], for the names of the key). An error when the replica
    /// never got the warm-up grant or could not be cut off.
    fn cut_replica(&mut self, _suffix: &str) -> Result<(), String> {
        Ok(())
    }
    /// Loses the primary (and promotes what takes over). Returns what happened (for a Redis
    /// form cut off by [`FailingStore::cut_replica`], what the promoted node holds of the key
    /// before any successor: [`crate::stores::redis::server::GRANT_LOST`] when the holder's
    /// grant is not there) and the URL to use after it.
    fn fail_over(&mut self, suffix: &str) -> (String, String) {
        ("no failover for this store".into(), self.url(suffix))
    }
}

/// How a store-failure scenario runs on one kind of store.
#[derive(Clone, Copy)]
pub struct Plan {
    /// Starts a fresh private store (blocking; panics when it cannot).
    pub start: fn() -> Box<dyn FailingStore>,
    /// What is started and how it fails, for the report.
    pub setup: &'static str,
}

/// The `?options` part of a URL suffix (for stores whose private server has its own
/// database: only the options carry over).
pub(crate) fn query(suffix: &str) -> &str {
    suffix.find('?').map_or("", |i| &suffix[i..])
}
