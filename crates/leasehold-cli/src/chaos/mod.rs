//! `leasehold chaos`: runs a failure against the user's store with real processes, records
//! what every process did, checks the history and draws it.
//!
//! Scenarios:
//! - `stalled-holder`: a holder process (this binary, `chaos-worker`) acquires the key with
//!   auto-renew, claims the resource and writes; the tool SIGSTOPs it past its lease; a
//!   successor (this process) acquires, claims and writes; the holder is resumed and writes
//!   again. Run with the fence check on every write, and without (the control, where the
//!   stale write must be seen getting through, so the check can fail).
//! - `stalled-holder-http` ([`http`]): the same, the resource being an HTTP service behind
//!   `leasehold fence-proxy` (the control writes to the service directly).
//! - `stalled-holder-tx`: the same, the holder frozen *inside* its checked transaction
//!   (write applied, not committed) on a SQL resource (PostgreSQL, MySQL, else SQLite); it
//!   commits when resumed. Read strictly: any holder effect committed after the successor's
//!   grant is stale. Also counts successors whose claim had to wait for the holder's resume.
//! - `partition`: the same, with the holder cut off from the store by a fault proxy instead of
//!   frozen; its `lost()` must fire before the store grants the key to the successor.
//! - `store-kill` and `failover` ([`faults`]): the store itself fails, on private servers
//!   this tool starts.
//! - `unknown-acquire` ([`unknown`]): an acquire's reply is dropped; no orphan may outlive the
//!   cleanup (or, when the link stays cut, the store's expiry).

mod faults;
mod fences;
mod holder;
mod http;
mod permits;
mod report;
mod timeline;
mod topology;
mod unknown;

use holder::Holder;
pub use holder::worker_cmd;
pub use permits::check_permits;
pub use report::{Report, table, verdict};

pub use crate::scenarios::ChaosScenario as Scenario;

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use leasehold::fence::Fencing;
use leasehold::{Error, Locker, StoreUrl, Wait};
use leasehold_harness::history::chaos::{Arm, Event, Trial};
use leasehold_harness::history::monotonic_ns;
use leasehold_harness::stores;
use nix::sys::signal::Signal;

use tokio::io::AsyncWriteExt;

/// The lock key every trial uses: the resource is guarded by one key, so fences of later
/// trials are larger and the resource's claim rule applies across trials.
pub const KEY: &str = "leasehold-chaos:stalled-holder";

/// Settings from the command line.
pub struct Settings {
    pub url: StoreUrl,
    pub scenario: Scenario,
    pub trials: usize,
    pub control_trials: usize,
    pub ttl: Duration,
    pub out: PathBuf,
    /// `--topology`: a private deployment of several servers ([`topology`]).
    pub topology: Option<String>,
    /// `--permits N` (stalled-holder): the holder and its successor take permits of a
    /// semaphore of N on [`KEY`], the other N-1 held by idle holders for the whole trial.
    pub permits: Option<u32>,
    /// A locker already open on `url` (the `--permits` check's), used by the trials instead
    /// of a new one: the idle holders and the successor share it, since a second locker on
    /// one SQLite file in one process breaks the first's file locks (see CHAOS.md).
    pub locker: Option<Locker>,
}

/// The session timeout the URL asks for (etcd's `ttl`, ZooKeeper's `session`, their defaults
/// otherwise); zero for stores whose locks are not bound to a session.
fn session_timeout(u: &StoreUrl) -> Duration {
    u.session_timeout().unwrap_or(Duration::ZERO)
}

/// The single `HOST:PORT` a store URL points at, and the URL with it replaced by `to`.
fn through(
    url: &StoreUrl,
    to: std::net::SocketAddr,
) -> Result<(std::net::SocketAddr, StoreUrl), String> {
    let [hostport] = url.hosts()[..] else {
        return Err("the partition scenario needs a store URL with one host".into());
    };
    use std::net::ToSocketAddrs;
    let addr = hostport
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve {hostport}: {e}"))?
        .find(|a| a.ip().is_loopback())
        .ok_or_else(|| {
            format!(
                "the partition scenario only cuts stores on this machine's loopback, not {hostport}"
            )
        })?;
    // The same URL with another address: a new URL, parsed where it is made.
    let moved = url.with_hosts(&to.to_string());
    Ok((addr, moved.map_err(|e| e.to_string())?))
}

fn ev(who: &'static str, what: &str, fence: Option<u64>, detail: Option<String>) -> Event {
    Event { t_ns: monotonic_ns(), who, what: what.to_owned(), fence, detail }
}

/// The successor's claim (fenced arm) and write, as history events.
async fn successor_claim_and_write(
    res: &mut http::Res,
    l: &leasehold::Lease,
    fenced: bool,
    events: &mut Vec<Event>,
) {
    let f = l.fencing();
    if fenced {
        match res.claim(&f).await {
            Ok(()) => events.push(ev("successor", "claim", Some(f.token().get()), None)),
            Err(e) => events.push(ev(
                "successor",
                "claim-refused",
                Some(f.token().get()),
                Some(e.to_string()),
            )),
        }
    }
    events.push(successor_write(res, &f, fenced).await);
}

/// The successor's write, fenced or not, as a history event.
async fn successor_write(res: &mut http::Res, f: &Fencing, fenced: bool) -> Event {
    let outcome = match res.write(fenced.then_some(f), "successor").await {
        Ok(()) => "accepted".to_owned(),
        Err(e) => format!("rejected {e}"),
    };
    ev("successor", "effect", Some(f.token().get()), Some(outcome))
}

async fn stalled_trial(
    s: &Settings,
    locker: &Locker,
    spec: &str,
    fenced: bool,
    n: usize,
) -> Result<Trial, String> {
    let arm = if fenced { "fenced" } else { "unfenced" };
    let partition = s.scenario == Scenario::Partition;
    let in_tx = s.scenario == Scenario::StalledHolderTx;
    // Partition: the holder reaches the store through a fault proxy that swallows its traffic;
    // it keeps running and must notice. The resource stays reachable.
    let proxy = if partition {
        let (upstream, _) = through(&s.url, "127.0.0.1:1".parse().expect("addr"))?;
        Some(
            leasehold_harness::proxy::FaultProxy::start(upstream)
                .await
                .map_err(|e| e.to_string())?,
        )
    } else {
        None
    };
    let holder_url = match &proxy {
        Some(p) => through(&s.url, p.addr())?.1,
        None => s.url.clone(),
    };
    let holder_spec = if in_tx { format!("{}{spec}", holder::TX) } else { spec.to_owned() };
    let idle_held = match s.permits {
        Some(p) => permits::idle(s, locker, p).await?,
        None => Vec::new(),
    };
    let mut holder = Holder::spawn(s, &holder_url, &holder_spec, fenced).await?;
    let ready = holder.line(s.ttl * 20 + Duration::from_secs(20)).await?;
    let holder_fence: u64 = ready
        .strip_prefix("ready ")
        .and_then(|f| f.parse().ok())
        .ok_or_else(|| format!("the holder said {ready:?}"))?;
    let mut events = Vec::new();
    match &proxy {
        Some(p) => {
            p.set(leasehold_harness::proxy::Fault::Blackhole);
            events.push(ev(
                "chaos",
                "pause",
                Some(holder_fence),
                Some("partition (blackhole)".into()),
            ));
        }
        None => {
            holder.signal(Signal::SIGSTOP);
            events.push(ev("chaos", "pause", Some(holder_fence), Some("SIGSTOP".into())));
        }
    }
    let mut res = http::open(spec).await;
    // The successor: on lease stores it gets the key once the store expired the frozen
    // holder's lease, on etcd/ZooKeeper once its session expired; stores whose session is a
    // connection (PostgreSQL/MySQL session locks, flock) keep it for a frozen process.
    let wait = s.ttl * 4 + session_timeout(&s.url).mul_f64(1.5) + Duration::from_secs(3);
    let succ = match s.permits {
        None => locker.acquire(KEY, s.ttl * 10).wait(Wait::For(wait)).await,
        Some(p) => locker
            .acquire_permit(KEY, p, s.ttl * 10)
            .wait(Wait::For(wait))
            .await
            .map(leasehold::Permit::into_lease),
    };
    let mut unknown = false;
    let (successor_fence, lease) = match succ {
        Ok(l) => {
            let slot = s.permits.map(|_| l.key().as_str().to_owned());
            if let Some(got) = &slot {
                permits::same_slot(got, &holder.events)?;
            }
            events.push(ev("successor", "acquire", Some(l.fence().get()), slot));
            (Some(l.fence().get()), Some(l))
        }
        Err(Error::Busy { .. }) => {
            events.push(ev(
                "successor",
                "busy",
                None,
                Some(format!("the frozen holder kept its session lock for {wait:?}")),
            ));
            (None, None)
        }
        Err(e) => {
            unknown = matches!(e, Error::UnknownOutcome(_));
            events.push(ev("successor", "error", None, Some(e.to_string())));
            (None, None)
        }
    };
    let mut resumed = false;
    let mut blocked = false;
    if let Some(l) = &lease {
        let mut succ = Vec::new();
        let mut resume = async |why: String| {
            holder.signal(Signal::SIGCONT);
            events.push(ev("chaos", "resume", Some(holder_fence), Some(why)));
            let _ = holder.stdin.write_all(b"write\n").await;
        };
        if in_tx && stores::is_own_resource(spec) {
            // A frozen process keeps the file's write lock and no server can end its
            // transaction: the successor could only wait (blocking this thread). Resume the
            // holder, which commits (or is refused), then let the successor go.
            blocked = true;
            resumed = true;
            resume("SIGCONT: SQLite cannot end a frozen holder's transaction".into()).await;
            successor_claim_and_write(&mut res, l, fenced, &mut succ).await;
        } else if in_tx {
            // The frozen holder's open transaction may hold the row locks the successor
            // needs: give the server's bounds their time, then resume the holder (which
            // commits, or is refused) and let the successor finish.
            let work = successor_claim_and_write(&mut res, l, fenced, &mut succ);
            tokio::pin!(work);
            let patience = s.ttl * 4 + Duration::from_secs(2);
            if tokio::time::timeout(patience, &mut work).await.is_err() {
                blocked = true;
                resumed = true;
                resume(format!("SIGCONT: the successor still waited after {patience:?}")).await;
                work.await;
            }
        } else {
            successor_claim_and_write(&mut res, l, fenced, &mut succ).await;
        }
        events.append(&mut succ);
    }
    match &proxy {
        Some(_) => {
            events.push(ev("chaos", "resume", Some(holder_fence), Some("holder writes".into())))
        }
        None if resumed => {}
        None => {
            holder.signal(Signal::SIGCONT);
            events.push(ev("chaos", "resume", Some(holder_fence), Some("SIGCONT".into())));
        }
    }
    let said = if lease.is_some() {
        if !resumed {
            let _ = holder.stdin.write_all(b"write\n").await;
        }
        holder.line(Duration::from_secs(30)).await.unwrap_or_else(|e| format!("no answer: {e}"))
    } else {
        holder.signal(Signal::SIGKILL);
        "killed (the successor never got the key)".into()
    };
    // The successor goes on working after the stale write, still holding the key.
    if let Some(l) = &lease {
        let f = l.fencing();
        tokio::time::sleep(s.ttl / 4).await;
        events.push(successor_write(&mut res, &f, fenced).await);
    }
    let final_value = res.read().await;
    if let Some(l) = lease {
        let r = l.release().await;
        events.push(ev("successor", "release", successor_fence, Some(format!("{r:?}"))));
    }
    if let Some(p) = &proxy {
        p.set(leasehold_harness::proxy::Fault::Reset);
    }
    holder.finish().await;
    for p in idle_held {
        if let Err(e) = p.release().await {
            events.push(ev("chaos", "idle-release", None, Some(e.to_string())));
        }
    }
    events.append(&mut holder.events);
    events.sort_by_key(|e| e.t_ns);
    let mut t = Trial::checked(arm, n, holder_fence, successor_fence, said, final_value, events);
    t.unknown |= unknown;
    t.successor_blocked = blocked;
    if !partition {
        // A frozen holder cannot learn anything before it is resumed, so its late lost() says
        // nothing about the store; the fence check is what this scenario tests.
        t.lost_late = false;
        t.lost_lead_ms = None;
    }
    Ok(t)
}

/// What a run ran against, for the report.
struct Outline {
    /// The store URL the trials used.
    store: String,
    guarantees: leasehold::Guarantees,
    /// Where the resource lives.
    resource: String,
    /// How the store was set up and failed, when the tool started it.
    setup: Option<String>,
}

/// Runs the scenario and writes `report.json` and `timeline.svg` to `out`.
pub async fn run(s: Settings) -> Result<Report, String> {
    std::fs::create_dir_all(&s.out)
        .map_err(|e| format!("cannot create {}: {e}", s.out.display()))?;
    let (trials, outline) = match s.scenario {
        _ if s.topology.is_some() => {
            topology::run(&s, s.topology.as_deref().unwrap_or_default()).await?
        }
        Scenario::StalledHolder
        | Scenario::StalledHolderHttp
        | Scenario::StalledHolderTx
        | Scenario::Partition => holder_trials(&s).await?,
        Scenario::StoreKill | Scenario::Failover => faults::run(&s).await?,
        Scenario::UnknownAcquire => unknown::run(&s).await?,
    };
    eprintln!();
    let mut names: Vec<&'static str> = Vec::new();
    for t in &trials {
        if !names.contains(&t.arm) {
            names.push(t.arm);
        }
    }
    let arms = names.iter().map(|arm| Arm::of(arm, &trials)).collect();
    let report = Report {
        store: outline.store,
        backend: outline.guarantees.backend,
        guarantees: outline.guarantees,
        scenario: s.scenario,
        ttl_ms: s.ttl.as_millis() as u64,
        resource: outline.resource,
        setup: outline.setup,
        key: KEY,
        permits: s.permits,
        topology: s.topology.clone(),
        arms,
        trials,
    };
    let json = serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?;
    std::fs::write(s.out.join("report.json"), format!("{json}\n"))
        .and_then(|_| std::fs::write(s.out.join("timeline.svg"), timeline::timeline(&report)))
        .map_err(|e| format!("cannot write to {}: {e}", s.out.display()))?;
    Ok(report)
}

/// Progress on stderr, one line rewritten in place.
fn progress(s: &Settings, arm: &str, n: usize, count: usize) {
    eprint!("\r[{}] {arm:<9} trial {}/{count} ", s.scenario, n + 1);
    let _ = std::io::stderr().flush();
}

/// `stalled-holder` and `partition`, on the user's store.
async fn holder_trials(s: &Settings) -> Result<(Vec<Trial>, Outline), String> {
    let locker = match &s.locker {
        Some(l) => l.clone(),
        None => connect(&s.url).await?,
    };
    // stalled-holder-http: the upstream and its proxy live as long as the trials.
    let setup = match s.scenario {
        Scenario::StalledHolderHttp => Some(http::start(&s.url, &s.out).await?),
        _ => None,
    };
    let (spec, where_) = match &setup {
        Some(h) => (h.spec.clone(), h.description.clone()),
        None => {
            let in_tx = s.scenario == Scenario::StalledHolderTx;
            let r = stores::resource_spec(&s.url, &s.out, in_tx);
            (r.spec, r.what)
        }
    };
    if stores::is_own_resource(&spec) {
        // The tool's own resource file: start it fresh, since another store's fences (an
        // earlier run's) are not comparable with this one's and would be refused.
        fresh_resource(&s.out);
    }
    // A store that issues no fence (Redlock, a session lock with fence=none) has nothing a
    // resource could check: only the unfenced arm can run, and it shows what gets through.
    let fenceless = locker.guarantees().fence_repeat == leasehold::FenceRepeat::NoFence;
    let mut trials = Vec::new();
    for fenced in [true, false] {
        let count = match (fenced, fenceless) {
            (true, true) => 0,
            (true, false) => s.trials,
            (false, _) => s.control_trials,
        };
        for n in 0..count {
            progress(s, if fenced { "fenced" } else { "unfenced" }, n, count);
            let mut t = stalled_trial(s, &locker, &spec, fenced, n).await?;
            // Every grant carries 0: there is no order to check.
            t.fence_out_of_order &= !fenceless;
            trials.push(t);
        }
    }
    let removed = match remove_resource(&s.url, &spec, s.permits).await {
        Ok(()) => "; removed from the store at the end (final values are in the trials)",
        Err(e) => {
            eprintln!("\nchaos: warning: could not remove the resource from the store: {e}");
            ""
        }
    };
    let outline = Outline {
        store: s.url.to_string(),
        guarantees: locker.guarantees(),
        resource: format!("{where_}{removed}"),
        setup: fenceless.then(|| {
            "this store issues no fence, so no fenced arm can run: a resource cannot tell a \
             stale holder from the current one (give it an external fence source)"
                .to_owned()
        }),
    };
    Ok((trials, outline))
}

/// Leaves nothing of the trials on the user's store: the resource's value and fence rows
/// or keys, and what the store's kit says chaos's keys left (on Redis the lock key's and a
/// semaphore's slots' fence counters and the release tombstone). Lease-table rows of the lock
/// key stay, as for any released key.
async fn remove_resource(u: &StoreUrl, spec: &str, permits: Option<u32>) -> Result<(), String> {
    if let http::Res::Harness(mut r) = http::open(spec).await {
        r.remove().await?;
    }
    stores::kit(u.scheme()).forget(u, KEY, permits).await
}

/// A locker on `url`, bounded by the default connect timeout.
async fn connect(url: &StoreUrl) -> Result<Locker, String> {
    Locker::open(url, leasehold::DEFAULT_CONNECT_TIMEOUT).await.map_err(|e| e.to_string())
}

/// Removes the tool's own resource in `out` (a run starts it fresh).
fn fresh_resource(out: &Path) {
    stores::remove_own_resource(out);
}
