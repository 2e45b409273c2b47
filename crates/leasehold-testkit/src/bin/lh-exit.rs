//! Takes a lease and returns from `main` with an error while holding it, as a service that
//! hits a `?` would: `lh-exit URL KEY [current-thread]`. With `current-thread` it runs on a
//! current-thread runtime and calls `Locker::close` before returning, as the docs say.

use std::time::Duration;

type Res = Result<(), Box<dyn std::error::Error + Send + Sync>>;

async fn hold(url: &str, key: &str, close: bool) -> Res {
    let locker = leasehold::Locker::connect(url).await?;
    let lease = locker.acquire(key, Duration::from_secs(60)).await?;
    println!("held {}", lease.fence());
    let failed: Res = Err("the work failed".into());
    if close {
        drop(lease);
        locker.close().await?;
    }
    failed
}

fn main() -> Res {
    let args: Vec<String> = std::env::args().collect();
    let (Some(url), Some(key)) = (args.get(1), args.get(2)) else {
        return Err("usage: lh-exit URL KEY [current-thread]".into());
    };
    let current = args.get(3).is_some_and(|a| a == "current-thread");
    let rt = if current {
        tokio::runtime::Builder::new_current_thread().enable_all().build()?
    } else {
        tokio::runtime::Builder::new_multi_thread().enable_all().build()?
    };
    rt.block_on(hold(url, key, current))
}
