//! Worker process for leasehold's process-level tests. Not a user tool.
//!
//! ```text
//! lh-worker mutex --key K --iters N --history FILE --counter FILE
//! lh-worker hold  --key K --ttl-ms N --resource sqlite:PATH|redis://… --fenced 0|1
//! lh-worker permit --key K --permits N --iters I --dir DIR --who NAME
//! lh-worker fenced --key K --ttl-ms N --resource PATH --history FILE --who NAME
//! lh-worker wait  --key K --wait-ms N
//! ```
//!
//! The store URL comes from `$LH_WORKER_STORE` (never argv, where `ps` shows it).

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use leasehold::{Locker, Wait};
use leasehold_testkit::history::Recorder;
use leasehold_testkit::process::open_resource;
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
        "fenced" => {
            let ttl = Duration::from_millis(opt("ttl-ms")?.parse()?);
            let (resource, history) = (opt("resource")?, opt("history")?);
            let files = (Path::new(&resource), Path::new(&history));
            fenced(&locker, &opt("key")?, ttl, files, &opt("who")?).await
        }
        "wait" => {
            wait(&locker, &opt("key")?, Duration::from_millis(opt("wait-ms")?.parse()?)).await
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

/// Says "waiting", waits up to `wait` for `key`, and says what came of it: "acquired FENCE"
/// (then "released true|false" after giving it back), "busy" when the wait ran out, or
/// "error: …".
async fn wait(locker: &Locker, key: &str, wait: Duration) -> Res<()> {
    println!("waiting");
    match locker.acquire(key, Duration::from_secs(30)).wait(Wait::For(wait)).await {
        Ok(lease) => {
            println!("acquired {}", lease.fence());
            println!("released {}", lease.release().await?.is_clean());
        }
        Err(leasehold::Error::Busy { .. }) => println!("busy"),
        Err(e) => println!("error: {e}"),
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
    let mut res = open_resource(resource_path).await;
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

/// `fenced`: until `stop` on stdin, acquire (auto-renewed) → two fenced effects on the shared
/// resource ([`leasehold_testkit::torture::effect`]) → release, recording each hold in the history file.
/// Presents its fence as a holder that cannot see its lease would, so what refuses a stale
/// effect is the resource's check. `hold F` on stdin: the first hold whose fence is above F
/// pauses after its first effect, saying `paused FENCE`, until `go` (at most 60 s). Failed
/// acquires (a failover under way), unknown outcomes, refused effects, losses and releases
/// that found the grant gone are counted, never fatal; the last line is `done COUNTS`.
async fn fenced(
    locker: &Locker,
    key: &str,
    ttl: Duration,
    (resource, history): (&Path, &Path),
    who: &str,
) -> Res<()> {
    use leasehold_testkit::torture;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};
    let mut rec = Recorder::create(history)?;
    let mut db = torture::open(resource)?;
    let (stop_tx, mut stop) = tokio::sync::watch::channel(false);
    let hold_above = Arc::new(AtomicU64::new(u64::MAX));
    let go = Arc::new(tokio::sync::Notify::new());
    {
        let (hold_above, go) = (hold_above.clone(), go.clone());
        tokio::spawn(async move {
            let mut stdin = tokio::io::BufReader::new(tokio::io::stdin()).lines();
            while let Ok(Some(line)) = stdin.next_line().await {
                match line.split_once(' ') {
                    Some(("hold", f)) => hold_above.store(f.parse().unwrap_or(0), Ordering::SeqCst),
                    _ if line == "go" => go.notify_one(),
                    _ if line == "stop" => break,
                    _ => {}
                }
            }
            let _ = stop_tx.send(true);
        });
    }
    let mut n = torture::Counts::default();
    while !*stop.borrow() {
        let acquire =
            locker.acquire(key, ttl).auto_renew(true).wait(Wait::For(Duration::from_secs(20)));
        let got = tokio::select! {
            got = acquire => got,
            _ = stop.changed() => break,
        };
        let lease = match got {
            Ok(l) => l,
            Err(leasehold::Error::UnknownOutcome(_)) => {
                n.unknown += 1;
                continue;
            }
            Err(leasehold::Error::Busy { .. }) => {
                n.busy += 1;
                continue;
            }
            Err(e) => {
                eprintln!("lh-worker {who}: acquire failed: {e}");
                n.acquire_errors += 1;
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let fence = lease.fence().get();
        rec.enter(fence)?;
        n.holds += 1;
        let fencing =
            leasehold::fence::Fencing::new(lease.key().clone(), lease.fence(), lease.owner());
        for i in 0..2 {
            match torture::effect(&mut db, &fencing, who) {
                Ok(()) => n.effects += 1,
                Err(leasehold::Error::StaleFence { .. }) => n.refused += 1,
                Err(e) => return Err(format!("the resource failed: {e}").into()),
            }
            if i == 0 && fence > hold_above.load(Ordering::SeqCst) {
                hold_above.store(u64::MAX, Ordering::SeqCst);
                println!("paused {fence}");
                let _ = tokio::time::timeout(Duration::from_secs(60), go.notified()).await;
            } else if i == 0 {
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        }
        rec.exit(fence)?;
        n.lost += u64::from(lease.is_lost());
        match lease.release().await {
            Ok(r) => n.overlapped += u64::from(r.may_have_overlapped()),
            Err(leasehold::Error::UnknownOutcome(_)) => n.unknown += 1,
            Err(_) => n.release_errors += 1,
        }
    }
    println!("done {n}");
    Ok(())
}
