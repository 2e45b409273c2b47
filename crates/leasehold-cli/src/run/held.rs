//! What a `run` holds: one lease (a key, or a reader of it with `--shared`), a permit of a
//! semaphore (`--permits N`), or several keys at once (`run A B … -- CMD`); with its
//! deadline, its loss and the environment the command gets (`docs/design.md` §9).

use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, Instant};

use leasehold::fence::{ENV_FENCE, ENV_KEY, ENV_OWNER};
use leasehold::{Lease, Leases, Locker, LostReason, Permit, Released, Result, Wait};

/// `LEASEHOLD_SLOT`: the slot a `--permits` run holds, `0..N`.
pub(crate) const ENV_SLOT: &str = "LEASEHOLD_SLOT";
/// `LEASEHOLD_PERMITS`: N of a `--permits N` run.
pub(crate) const ENV_PERMITS: &str = "LEASEHOLD_PERMITS";
/// `LEASEHOLD_MODE`: `shared` for a `--shared` run (a reader), else `exclusive`.
pub(crate) const ENV_MODE: &str = "LEASEHOLD_MODE";
/// `LEASEHOLD_KEYS`: how many keys a run of several keys holds; each `I` in `0..count`
/// then has `LEASEHOLD_KEY_I`, `LEASEHOLD_FENCE_I`, `LEASEHOLD_OWNER_I`, in key order.
pub(crate) const ENV_KEYS: &str = "LEASEHOLD_KEYS";

/// What is asked for.
pub(crate) struct Ask<'a> {
    pub keys: &'a [String],
    pub permits: Option<u32>,
    pub shared: bool,
    pub ttl: Duration,
    pub wait: Wait,
    pub margin: Option<Duration>,
}

/// A run's grant.
pub(crate) enum Held {
    /// One key, exclusive or shared.
    One(Lease, bool),
    /// One permit of a semaphore.
    Permit(Permit),
    /// Several keys, in key order.
    Many(Leases),
}

/// Acquires what `ask` names, with auto-renew.
pub(crate) async fn acquire(locker: &Locker, ask: &Ask<'_>) -> Result<Held> {
    let m = ask.margin;
    match (ask.keys, ask.permits) {
        ([key], Some(n)) => {
            let a = locker.acquire_permit(key, n, ask.ttl).wait(ask.wait).auto_renew(true);
            Ok(Held::Permit(match m {
                Some(m) => a.margin(m).await?,
                None => a.await?,
            }))
        }
        ([key], None) => {
            let a = if ask.shared {
                locker.acquire_shared(key, ask.ttl)
            } else {
                locker.acquire(key, ask.ttl)
            };
            let a = a.wait(ask.wait).auto_renew(true);
            let lease = match m {
                Some(m) => a.margin(m).await?,
                None => a.await?,
            };
            Ok(Held::One(lease, ask.shared))
        }
        (keys, _) => {
            let a = locker.acquire_all(keys, ask.ttl).wait(ask.wait).auto_renew(true);
            Ok(Held::Many(match m {
                Some(m) => a.margin(m).await?,
                None => a.await?,
            }))
        }
    }
}

impl Held {
    fn leases(&self) -> Vec<&Lease> {
        match self {
            Held::One(l, _) => vec![l],
            Held::Permit(p) => vec![p.lease()],
            Held::Many(ls) => ls.iter().collect(),
        }
    }

    /// Every grant held, as (key, owner token): what an owner-checked release names.
    pub fn grants(&self) -> Vec<(String, String)> {
        self.leases().iter().map(|l| (l.key().as_str().to_owned(), l.owner().to_string())).collect()
    }

    /// The earliest local deadline among the leases held; `None` for session locks.
    pub fn deadline(&self) -> Option<Instant> {
        self.leases().iter().filter_map(|l| l.deadline()).min()
    }

    /// The lease length requested.
    pub fn ttl(&self) -> Duration {
        self.leases()[0].ttl()
    }

    /// Resolves when any lease held is lost.
    pub fn lost(&self) -> Pin<Box<dyn Future<Output = LostReason> + Send + 'static>> {
        match self {
            Held::One(l, _) => Box::pin(l.lost()),
            Held::Permit(p) => Box::pin(p.lost()),
            Held::Many(ls) => {
                let lost = ls.lost();
                Box::pin(async move { lost.await.1 })
            }
        }
    }

    /// Owner-checked release of everything held.
    pub async fn release(self) -> Result<Released> {
        match self {
            Held::One(l, _) => l.release().await,
            Held::Permit(p) => p.release().await,
            Held::Many(ls) => ls.release().await,
        }
    }

    /// The variables the command gets (see `run --help`).
    pub fn env(&self) -> Vec<(String, String)> {
        let one = |l: &Lease| {
            vec![
                (ENV_KEY.to_owned(), l.key().as_str().to_owned()),
                (ENV_FENCE.to_owned(), l.fence().to_string()),
                (ENV_OWNER.to_owned(), l.owner().to_string()),
            ]
        };
        match self {
            Held::One(l, shared) => {
                let mut env = one(l);
                let mode = if *shared { "shared" } else { "exclusive" };
                env.push((ENV_MODE.to_owned(), mode.to_owned()));
                env
            }
            Held::Permit(p) => {
                let mut env = one(p.lease());
                env.push((ENV_SLOT.to_owned(), p.slot().to_string()));
                env.push((ENV_PERMITS.to_owned(), p.permits().to_string()));
                env
            }
            Held::Many(ls) => {
                let mut env = vec![(ENV_KEYS.to_owned(), ls.iter().count().to_string())];
                for (i, l) in ls.iter().enumerate() {
                    for (k, v) in one(l) {
                        env.push((format!("{k}_{i}"), v));
                    }
                }
                env
            }
        }
    }
}
