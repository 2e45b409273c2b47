//! The manual commands: `acquire`, `renew`, `release`, for scripts that hold a lease across
//! several commands.

use crate::exit::{Exit, code};
use crate::opts::{GrantOpt, StoreOpt, TimeoutOpt};
use crate::store;
use leasehold::{Error, LockKind, OwnerToken};
use std::time::Duration;

pub(crate) fn parse_owner(s: &str) -> Result<OwnerToken, Exit> {
    Ok(s.parse::<OwnerToken>()?)
}

/// `acquire --json`: the detached lease, for `renew` and `release --owner`.
#[derive(serde::Serialize)]
struct Acquired<'a> {
    key: &'a str,
    /// The full owner token (it lets `release --owner` end the lease).
    owner: String,
    fence: u64,
    ttl_ms: u64,
}

pub(crate) async fn acquire(
    store: StoreOpt,
    TimeoutOpt { timeout }: TimeoutOpt,
    GrantOpt { ttl, wait }: GrantOpt,
    json: bool,
    key: String,
) -> Result<Exit, Exit> {
    let (_, locker) = store::open(&store, timeout).await?;
    // The process ends at once; the lease stays: say so in `status`.
    let info = leasehold::HolderInfo::this_process().with_command("leasehold acquire (detached)");
    let locker = locker.with_holder_info(Some(info));
    if locker.guarantees().kind != LockKind::Lease {
        return Err(Exit::fail(
            code::USAGE,
            format!(
                "{}:// locks live only as long as the process holding them; use `leasehold run`",
                locker.guarantees().backend
            ),
        ));
    }
    let lease = locker.acquire(&key, ttl).wait(wait).await?;
    let f = lease.detach();
    if json {
        let v = Acquired {
            key: f.key().as_str(),
            owner: f.owner().to_string(),
            fence: f.token().get(),
            ttl_ms: ttl.as_millis() as u64,
        };
        println!("{}", serde_json::to_string(&v).expect("plain data serializes"));
    } else {
        println!("owner={}\nfence={}", f.owner(), f.token());
    }
    Ok(Exit::ok(0))
}

pub(crate) async fn renew(
    store: StoreOpt,
    TimeoutOpt { timeout }: TimeoutOpt,
    ttl: Duration,
    owner: String,
    key: String,
) -> Result<Exit, Exit> {
    let owner = parse_owner(&owner)?;
    let (_, locker) = store::open(&store, timeout).await?;
    if locker.renew_by_owner(&key, &owner, ttl).await? {
        Ok(Exit::ok(0))
    } else {
        Err(Error::NotOwner { key: leasehold::Key::new(key)? }.into())
    }
}

pub(crate) async fn release(
    store: StoreOpt,
    TimeoutOpt { timeout }: TimeoutOpt,
    owner: String,
    key: String,
) -> Result<Exit, Exit> {
    let owner = parse_owner(&owner)?;
    let (_, locker) = store::open(&store, timeout).await?;
    if locker.release_by_owner(&key, &owner).await? {
        Ok(Exit::ok(0))
    } else {
        Err(Exit::fail(
            code::NOT_OWNER,
            format!(
                "not the owner of {key:?}: the lease expired or was taken over; the current holder, if any, is untouched"
            ),
        ))
    }
}
