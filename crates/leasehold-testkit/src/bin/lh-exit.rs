//! Takes a lease and returns from `main` with an error while holding it, as a service that
//! hits a `?` would: `lh-exit URL KEY [multi-thread|current-thread|current-thread-no-close]`.
//! The work is a function of its own whose `?` drops the lease; `current-thread` closes the
//! locker before `main` returns, as the docs say to on that runtime, and
//! `current-thread-no-close` does not (the key then stays held until its TTL).

use std::time::Duration;

type Res = Result<(), Box<dyn std::error::Error + Send + Sync>>;

async fn work(locker: &leasehold::Locker, key: &str) -> Res {
    let lease = locker.acquire(key, Duration::from_secs(60)).await?;
    println!("held {}", lease.fence());
    let failed: Res = Err("the work failed".into());
    failed?; // returns here, dropping the lease
    let _ = lease.release().await?;
    Ok(())
}

async fn run(url: &str, key: &str, close: bool) -> Res {
    let locker = leasehold::Locker::connect(url).await?;
    let result = work(&locker, key).await;
    if close {
        locker.close().await?;
    }
    result
}

fn main() -> Res {
    let args: Vec<String> = std::env::args().collect();
    let (Some(url), Some(key)) = (args.get(1), args.get(2)) else {
        return Err(
            "usage: lh-exit URL KEY [multi-thread|current-thread|current-thread-no-close]".into()
        );
    };
    let flavor = args.get(3).map_or("multi-thread", String::as_str);
    let rt = match flavor {
        "multi-thread" => tokio::runtime::Builder::new_multi_thread().enable_all().build()?,
        _ => tokio::runtime::Builder::new_current_thread().enable_all().build()?,
    };
    rt.block_on(run(url, key, flavor == "current-thread"))
}
