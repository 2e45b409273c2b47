//! A store under test and what must live as long as it.

/// A store under test plus whatever must live as long as it (a temp dir, a server).
pub struct Fixture {
    /// The locker over the store.
    pub locker: leasehold::Locker,
    /// The store's URL, for scenarios that start other processes.
    pub url: String,
    /// Dropped with the fixture.
    pub guard: Box<dyn std::any::Any + Send>,
}

pub(crate) async fn fixture(url: String, guard: impl std::any::Any + Send) -> Fixture {
    let locker = leasehold::Locker::connect(&url)
        .await
        .unwrap_or_else(|e| panic!("cannot open the store at {url}: {e}"));
    Fixture { locker, url, guard: Box::new(guard) }
}
