//! Worker process for leasehold's process-level tests. Not a user tool.
//!
//! ```text
//! lh-worker mutex --key K --iters N --history FILE --counter FILE
//! lh-worker hold  --key K --ttl-ms N --resource sqlite:PATH|redis://… --fenced 0|1
//! lh-worker permit --key K --permits N --iters I --dir DIR --who NAME
//! ```
//!
//! The store URL comes from `$LH_WORKER_STORE` (never argv, where `ps` shows it).

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use leasehold::{Locker, Wait};
use leasehold_testkit::history::Recorder;
use leasehold_testkit::process::resource;
use tokio::io::AsyncBufReadExt;

type Res<T> = Result<T, Box<dyn std::error::Error>>;

fn main() {
    let rt =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    if let Err(e) = rt.block_on(run()) {
        eprintln!("lh-worker: {e}");
        std::process::exit(1);
    }
}

async fn run() -> Res<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (cmd, rest) = args.split_first().ok_or("usage: lh-worker mutex|hold --opt value …")?;
    let mut opts = HashMap::new();
    for pair in rest.chunks(2) {
        match pair {
            [k, v] if k.starts_with("--") => {
                opts.insert(k[2..].to_string(), v.clone());
            }
            _ => return Err(format!("bad arguments {rest:?}").into()),
        }
    }
    let opt = |k: &str| opts.get(k).cloned().ok_or_else(|| format!("--{k} missing"));
    let store = std::env::var(leasehold_testkit::process::STORE_ENV)
        .map_err(|_| format!("${} is not set", leasehold_testkit::process::STORE_ENV))?;
    let locker = Locker::connect(&store).await?;
    match cmd.as_str() {
        "mutex" => {
            mutex(&locker, &opt("key")?, opt("iters")?.parse()?, &opt("history")?, &opt("counter")?)
                .await
        }
        "hold" => {
            hold(
                &locker,
                &opt("key")?,
                opt("ttl-ms")?.parse()?,
                &opt("resource")?,
                opt("fenced")? == "1",
            )
            .await
        }
        "permit" => {
            let (n, iters) = (opt("permits")?.parse()?, opt("iters")?.parse()?);
            permit(&locker, &opt("key")?, n, iters, Path::new(&opt("dir")?), &opt("who")?).await
        }
        other => Err(format!("unknown command {other}").into()),
    }
}

async fn mutex(locker: &Locker, key: &str, iters: usize, history: &str, counter: &str) -> Res<()> {
    let mut rec = Recorder::create(Path::new(history))?;
    for _ in 0..iters {
        let lease = locker
            .acquire(key, Duration::from_secs(30))
            .wait(Wait::For(Duration::from_secs(120)))
            .await?;
        let fence = lease.fence().get();
        rec.enter(fence)?;
        // Read-modify-write with a pause: any overlap loses an update.
        let n: u64 =
            std::fs::read_to_string(counter).ok().and_then(|s| s.trim().parse().ok()).unwrap_or(0);
        tokio::time::sleep(Duration::from_millis(1)).await;
        std::fs::write(counter, format!("{}\n", n + 1))?;
        rec.exit(fence)?;
        if lease.release().await?.may_have_overlapped() {
            return Err("release found the lease no longer ours".into());
        }
    }
    Ok(())
}

/// Takes one of `n` permits `iters` times, recording each critical section in the history of
/// its slot (`DIR/slotS/WHO.hist`), so the checker sees each slot's holders and fences.
async fn permit(
    locker: &Locker,
    key: &str,
    n: u32,
    iters: usize,
    dir: &Path,
    who: &str,
) -> Res<()> {
    let mut recs: HashMap<u32, Recorder> = HashMap::new();
    for _ in 0..iters {
        let p = locker
            .acquire_permit(key, n, Duration::from_secs(30))
            .wait(Wait::For(Duration::from_secs(120)))
            .await?;
        let rec = match recs.entry(p.slot()) {
            std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::hash_map::Entry::Vacant(v) => {
                let d = dir.join(format!("slot{}", p.slot()));
                std::fs::create_dir_all(&d)?;
                v.insert(Recorder::create(&d.join(format!("{who}.hist")))?)
            }
        };
        let fence = p.fence().get();
        rec.enter(fence)?;
        tokio::time::sleep(Duration::from_millis(2)).await;
        rec.exit(fence)?;
        if p.release().await?.may_have_overlapped() {
            return Err("release found the permit no longer ours".into());
        }
    }
    Ok(())
}

/// Acquire with auto-renew, claim, write, say "ready FENCE", then on "write" from stdin write
/// again and say "accepted" or "rejected: …". The pause the test injects lands between the
/// two writes, as a GC pause would.
async fn hold(
    locker: &Locker,
    key: &str,
    ttl_ms: u64,
    resource_path: &str,
    fenced: bool,
) -> Res<()> {
    let lease = locker.acquire(key, Duration::from_millis(ttl_ms)).auto_renew(true).await?;
    // Presented as by a holder that cannot see its lease (a token from LEASEHOLD_FENCE), so
    // what refuses the late write is the resource's fence check, not the lease's deadline.
    let fencing = leasehold::fence::Fencing::new(lease.key().clone(), lease.fence(), lease.owner());
    let mut res = resource::open(resource_path).await;
    if fenced {
        res.claim(&fencing).await?;
    }
    res.write(fenced.then_some(&fencing), "holder-first").await?;
    println!("ready {}", lease.fence());
    let mut stdin = tokio::io::BufReader::new(tokio::io::stdin()).lines();
    while let Some(line) = stdin.next_line().await? {
        if line == "write" {
            match res.write(fenced.then_some(&fencing), "holder-stale").await {
                Ok(()) => println!("accepted"),
                Err(e) => println!("rejected: {e}"),
            }
            break;
        }
    }
    // Whatever the outcome, give the key back if it is still ours, and say what the store
    // answered: a holder resumed after its session or lease ended must hear "not ours"
    // (`false`), not an error.
    match lease.release().await {
        Ok(ours) => println!("released {}", ours.is_clean()),
        Err(e) => println!("release failed: {e}"),
    }
    Ok(())
}
