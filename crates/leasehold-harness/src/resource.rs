//! The protected resource of `chaos` and the process-level tests: one value, with leasehold's
//! fence beside it, on the store that holds it. Each store's resource lives in its folder
//! under [`crate::stores`] (behind that store's feature) and implements [`Resource`]; its
//! kit opens it ([`crate::stores::StoreKit::open_resource`]), and
//! [`crate::stores::open_resource`] opens a spec. This file is what every resource answers;
//! it names no store, so adding one touches only its folder.

use leasehold::fence::Fencing;

pub use crate::row::NAME;

/// An open resource: one value and its fence on one store.
#[async_trait::async_trait]
pub trait Resource: Send {
    /// Claims the resource for `fencing` (before the first effect). By default nothing to
    /// install: a resource fenced by the lock key itself (etcd's) has no claim step.
    async fn claim(&mut self, _fencing: &Fencing) -> leasehold::Result<()> {
        Ok(())
    }

    /// Writes `value`; with `fencing`, only if its fence is still the installed one,
    /// checked atomically with the write (on the SQL resources, committed with the fence
    /// module's `commit`, which refuses once the lease's time is up). A refused write is the
    /// fence module's error; a failed one the store client's, as
    /// [`leasehold::Error::Backend`].
    async fn write(&mut self, fencing: Option<&Fencing>, value: &str) -> leasehold::Result<()>;

    /// Opens a transaction, checks `fencing` in it (if given) and applies the write, without
    /// committing: [`Open::commit`] does. By default
    /// [`leasehold::Error::InvalidInput`]: a resource whose fenced write is one atomic step
    /// (Redis's script, etcd's transaction) has no transaction to hold open.
    async fn begin_write<'a>(
        &'a mut self,
        _fencing: Option<&Fencing>,
        _value: &str,
    ) -> leasehold::Result<Box<dyn Open + 'a>> {
        Err(leasehold::Error::InvalidInput(
            "this resource has no transaction to hold open (its fenced write is one atomic step)"
                .into(),
        ))
    }

    /// The current value (`None` when none was written). Panics when the store cannot be
    /// read: the tests and chaos have no answer to go on without it.
    async fn read(&mut self) -> Option<String>;

    /// Removes what this resource wrote to the store: the value and its fence row or hash,
    /// and the `data` and `leasehold_fence` tables when nothing else is left in them (a
    /// table that holds other rows stays). By default nothing: the tool's own resource is a
    /// file of its own, kept. An error says what could not be removed.
    async fn remove(&mut self) -> Result<(), String> {
        Ok(())
    }
}

/// A write on a resource whose transaction is still open: applied, not yet committed
/// ([`Resource::begin_write`]). Not `Send`: SQLite's transaction borrows its connection.
#[async_trait::async_trait(?Send)]
pub trait Open {
    /// Commits: with `fencing`, through the fence module's `commit`, which refuses (and
    /// rolls back) once the lease's time is up; without, plainly.
    async fn commit(self: Box<Self>, fencing: Option<&Fencing>) -> leasehold::Result<()>;
}
