//! The manual commands: `acquire`, `renew`, `release`, `status`, for scripts that hold a
//! lease across several commands.

use super::*;

pub(crate) fn parse_owner(s: &str) -> Result<OwnerToken, Exit> {
    Ok(s.parse::<OwnerToken>()?)
}

pub(crate) async fn acquire(
    store: StoreOpt,
    GrantOpt { ttl, wait }: GrantOpt,
    json: bool,
    key: String,
) -> Result<Exit, Exit> {
    let locker = connect(store).await?;
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
        let v = serde_json::json!({
            "key": f.key().as_str(),
            "owner": f.owner().to_string(),
            "fence": f.token().get(),
            "ttl_ms": ttl.as_millis() as u64,
        });
        println!("{v}");
    } else {
        println!("owner={}\nfence={}", f.owner(), f.token());
    }
    Ok(Exit::ok(0))
}

pub(crate) async fn renew(
    store: StoreOpt,
    ttl: Duration,
    owner: String,
    key: String,
) -> Result<Exit, Exit> {
    let owner = parse_owner(&owner)?;
    let locker = connect(store).await?;
    if locker.renew_by_owner(&key, &owner, ttl).await? {
        Ok(Exit::ok(0))
    } else {
        Err(Error::NotOwner { key: leasehold::Key::new(key)? }.into())
    }
}

pub(crate) async fn release(store: StoreOpt, owner: String, key: String) -> Result<Exit, Exit> {
    let owner = parse_owner(&owner)?;
    let locker = connect(store).await?;
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

pub(crate) async fn status(store: StoreOpt, json: bool, key: Option<String>) -> Result<Exit, Exit> {
    let locker = connect(store).await?;
    let holders = match locker.holders(key.as_deref()).await {
        // A session lock held by another process: the server knows the session, not the
        // owner token.
        Err(leasehold::Error::Busy { key }) => {
            if json {
                println!(
                    "{}",
                    serde_json::json!([{ "key": key, "owner": null, "held_by": "another session" }])
                );
            } else {
                println!(
                    "{key}: held by another session (its owner token is not known to the server)"
                );
            }
            return Ok(Exit::ok(0));
        }
        r => r?,
    };
    if json {
        println!(
            "{}",
            serde_json::to_string(&holders)
                .map_err(|e| Exit::fail(code::SOFTWARE, e.to_string()))?
        );
        return Ok(Exit::ok(0));
    }
    if holders.is_empty() {
        eprintln!("no holders");
        return Ok(Exit::ok(0));
    }
    let w = holders.iter().map(|h| h.key.as_str().chars().count()).max().unwrap_or(3).max(3);
    println!("{:<w$}  {:<32}  {:>8}  TIME LEFT", "KEY", "OWNER", "FENCE");
    for h in holders {
        let left = h.expires_in.map_or_else(|| "session".to_string(), dur::human);
        let fence = h.fence.map_or_else(|| "-".to_string(), |f| f.to_string());
        println!("{:<w$}  {}  {fence:>8}  {left}", h.key.as_str(), h.owner);
    }
    Ok(Exit::ok(0))
}
