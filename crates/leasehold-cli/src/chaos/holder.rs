//! The holder process of a trial: `leasehold chaos-worker` (the worker side), and the handle
//! the tool drives it through (its stdin, its `event …` lines, signals).

use std::io::Write as _;
use std::process::Stdio;
use std::time::{Duration, Instant};

use leasehold::Wait;
use leasehold_harness::history::monotonic_ns;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use tokio::io::{AsyncBufReadExt, BufReader};

use super::{Event, KEY, Settings};

/// Where the worker finds the resource spec (it may hold the store's password, so it never
/// goes on the command line).
pub const ENV_RESOURCE: &str = "LEASEHOLD_CHAOS_RESOURCE";

/// `leasehold chaos-worker`: the store URL from `$LEASEHOLD_STORE` and the resource from
/// `$LEASEHOLD_CHAOS_RESOURCE`, as [`Holder::spawn`] passes them.
pub async fn worker_cmd(
    key: &str,
    ttl_ms: u64,
    fenced: u8,
    permits: u32,
    gate: u8,
) -> Result<crate::exit::Exit, crate::exit::Exit> {
    let var = |name: &str| {
        std::env::var(name).map_err(|_| {
            crate::exit::Exit::fail(crate::exit::code::USAGE, format!("chaos-worker: no ${name}"))
        })
    };
    let (url, spec) = (var(crate::store::ENV_STORE)?, var(ENV_RESOURCE)?);
    let ttl = Duration::from_millis(ttl_ms);
    let code = worker(&url, (key, permits), ttl, &spec, (fenced == 1, gate == 1)).await;
    Ok(crate::exit::Exit::ok(code as u8))
}

/// The worker side (`leasehold chaos-worker`): hold the key, claim, write, say `ready`, and on
/// `write` write again; every step is printed as `event …` lines with monotonic timestamps.
/// With a resource spec `tx:SPEC` (stalled-holder-tx) the write before `ready` stays open,
/// uncommitted, in its checked transaction, and `write` commits it. With `permits` N > 0 it
/// holds one of N permits of `key` instead, a slot `KEY#i` with that slot's own fence (the
/// `acquire` event names the slot key). With `gated` it says `connected` once its store is
/// open and acquires only on `go` (the tool cuts a replica off in between).
pub async fn worker(
    url: &str,
    (key, permits): (&str, u32),
    ttl: Duration,
    spec: &str,
    (fenced, gated): (bool, bool),
) -> i32 {
    let (in_tx, spec) = match spec.strip_prefix(TX) {
        Some(rest) => (true, rest),
        None => (false, spec),
    };
    let out = |line: String| {
        let mut o = std::io::stdout().lock();
        let _ = writeln!(o, "{line}");
        let _ = o.flush();
    };
    let e = |what: &str, fence: u64, detail: &str| {
        format!("event {} {what} {fence} {detail}", monotonic_ns())
    };
    let locker = match super::fences::connect(url).await {
        Ok(l) => l,
        Err(err) => {
            out(format!("error {err}"));
            return 69;
        }
    };
    let mut stdin = BufReader::new(tokio::io::stdin()).lines();
    if gated {
        out("connected".into());
        loop {
            match stdin.next_line().await {
                Ok(Some(l)) if l == "go" => break,
                Ok(Some(_)) => continue,
                _ => return 0,
            }
        }
    }
    // A gated holder asks once: its trial left the key free, and a waiter's subscription
    // would open new connections (to every node of a cluster, the frozen replica among them).
    let wait = if gated { Wait::No } else { Wait::For(ttl * 20) };
    let got = match permits {
        0 => locker.acquire(key, ttl).auto_renew(true).wait(wait).await,
        n => locker
            .acquire_permit(key, n, ttl)
            .auto_renew(true)
            .wait(wait)
            .await
            .map(leasehold::Permit::into_lease),
    };
    let lease = match got {
        Ok(l) => l,
        Err(err) => {
            out(format!("error {err}"));
            return 69;
        }
    };
    // In the transaction variant the checks carry the lease's local deadline, which bounds
    // the transaction; otherwise the holder presents its fence as one that cannot see its
    // lease would (a token from LEASEHOLD_FENCE), so what refuses its late write is the
    // resource's fence check.
    let fencing = if in_tx {
        lease.fencing()
    } else {
        leasehold::fence::Fencing::new(lease.key().clone(), lease.fence(), lease.owner())
    };
    let fence = fencing.token().get();
    let slot = if permits > 0 { lease.key().as_str() } else { "" };
    out(e("acquire", fence, slot));
    {
        let lost = lease.lost();
        tokio::spawn(async move {
            let why = lost.await;
            let mut o = std::io::stdout().lock();
            let _ = writeln!(o, "event {} lost {fence} {why}", monotonic_ns());
            let _ = o.flush();
        });
    }
    let mut res = super::http::open(spec).await;
    if fenced {
        match res.claim(&fencing).await {
            Ok(()) => out(e("claim", fence, "")),
            Err(err) => {
                out(format!("error claim as {}: {err}", lease.key().as_str()));
                return 70;
            }
        }
    }
    if in_tx {
        return in_transaction(res, fenced.then_some(&fencing), fence, lease, &out, stdin).await;
    }
    match res.write(fenced.then_some(&fencing), "holder").await {
        Ok(()) => out(e("effect", fence, "accepted")),
        Err(err) => out(e("effect", fence, &format!("rejected {err}"))),
    }
    out(format!("ready {fence}"));
    // Polled while it waits: the instant admit() turns false (a partition's first sign).
    let mut admitted = true;
    loop {
        let line = tokio::select! {
            l = stdin.next_line() => l,
            _ = tokio::time::sleep(Duration::from_millis(5)), if admitted => {
                if !lease.admit() {
                    admitted = false;
                    out(e("admit-false", fence, ""));
                }
                continue;
            }
        };
        let Ok(Some(line)) = line else { break };
        if line == "write" {
            match res.write(fenced.then_some(&fencing), "stale-holder").await {
                Ok(()) => {
                    out(e("effect", fence, "accepted"));
                    out("accepted".into());
                }
                Err(err) => {
                    out(e("effect", fence, &format!("rejected {err}")));
                    out(format!("rejected: {err}"));
                }
            }
            break;
        }
    }
    // Stops working here: a successor granted from now on does not overlap this holder.
    out(e("releasing", fence, ""));
    let released = lease.release().await;
    out(e("release", fence, &format!("{released:?}")));
    0
}

/// The resource spec prefix of the transaction variant.
pub(super) const TX: &str = "tx:";

/// stalled-holder-tx's holder: the write is applied in its (checked) transaction, `ready` is
/// said with it still open, and `write` commits it. The commit's answer is the effect's.
async fn in_transaction(
    mut res: super::http::Res,
    fencing: Option<&leasehold::fence::Fencing>,
    fence: u64,
    lease: leasehold::Lease,
    out: &impl Fn(String),
    mut stdin: tokio::io::Lines<BufReader<tokio::io::Stdin>>,
) -> i32 {
    let e = |what: &str, detail: &str| format!("event {} {what} {fence} {detail}", monotonic_ns());
    let super::http::Res::Harness(r) = &mut res else {
        out("error stalled-holder-tx needs a SQL resource".into());
        return 70;
    };
    let open = match r.begin_write(fencing, "holder-in-transaction").await {
        Ok(open) => open,
        Err(err) => {
            out(format!("error write: {err}"));
            return 70;
        }
    };
    out(e("in-transaction", ""));
    out(format!("ready {fence}"));
    while let Ok(Some(line)) = stdin.next_line().await {
        if line == "write" {
            break;
        }
    }
    match open.commit(fencing).await {
        Ok(()) => {
            out(e("effect", "accepted"));
            out("accepted".into());
        }
        Err(err) => {
            out(e("effect", &format!("rejected {err}")));
            out(format!("rejected: {err}"));
        }
    }
    out(e("releasing", ""));
    let released = lease.release().await;
    out(e("release", &format!("{released:?}")));
    0
}

pub(super) struct Holder {
    pub(super) child: tokio::process::Child,
    pub(super) stdin: tokio::process::ChildStdin,
    lines: tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
    pub(super) events: Vec<Event>,
}

impl Holder {
    pub(super) async fn spawn(
        s: &Settings,
        url: &leasehold::StoreUrl,
        spec: &str,
        fenced: bool,
    ) -> Result<Holder, String> {
        Self::start(s, url, spec, fenced, false).await
    }

    /// A holder that says `connected` once its store is open and acquires only when sent
    /// `go` ([`Holder::go`]).
    pub(super) async fn spawn_gated(
        s: &Settings,
        url: &leasehold::StoreUrl,
        spec: &str,
        fenced: bool,
    ) -> Result<Holder, String> {
        Self::start(s, url, spec, fenced, true).await
    }

    /// Lets a gated holder acquire.
    pub(super) async fn go(&mut self) -> Result<(), String> {
        use tokio::io::AsyncWriteExt as _;
        self.stdin.write_all(b"go\n").await.map_err(|e| format!("the holder's stdin: {e}"))
    }

    async fn start(
        s: &Settings,
        url: &leasehold::StoreUrl,
        spec: &str,
        fenced: bool,
        gated: bool,
    ) -> Result<Holder, String> {
        let exe = std::env::current_exe().map_err(|e| e.to_string())?;
        let mut child = tokio::process::Command::new(exe)
            .arg("chaos-worker")
            .args(["--key", KEY])
            // Through the environment (readable only by this user), not argv (`ps` shows
            // that to everyone): the URL and the resource may hold a password.
            .env(crate::store::ENV_STORE, url.expose())
            .env(ENV_RESOURCE, spec)
            .env_remove(crate::store::ENV_STORE_FILE)
            .envs(super::fences::worker_env())
            .arg(format!("--ttl-ms={}", s.ttl.as_millis()))
            .arg(format!("--fenced={}", u8::from(fenced)))
            .arg(format!("--permits={}", s.permits.unwrap_or(0)))
            .arg(format!("--gate={}", u8::from(gated)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("cannot start a holder process: {e}"))?;
        let stdin = child.stdin.take().expect("piped");
        let lines = BufReader::new(child.stdout.take().expect("piped")).lines();
        Ok(Holder { child, stdin, lines, events: Vec::new() })
    }

    /// The next non-event line, recording events on the way (bounded).
    pub(super) async fn line(&mut self, limit: Duration) -> Result<String, String> {
        let deadline = Instant::now() + limit;
        loop {
            let next = tokio::time::timeout_at(deadline.into(), self.lines.next_line()).await;
            let line = match next {
                Err(_) => return Err(format!("the holder said nothing within {limit:?}")),
                Ok(Ok(Some(l))) => l,
                Ok(_) => return Err("the holder exited".into()),
            };
            if let Some(rest) = line.strip_prefix("event ") {
                self.record(rest);
                continue;
            }
            return Ok(line);
        }
    }

    fn record(&mut self, rest: &str) {
        let mut f = rest.splitn(4, ' ');
        let t = f.next().and_then(|v| v.parse().ok()).unwrap_or(0);
        let what = f.next().unwrap_or("?").to_owned();
        let fence = f.next().and_then(|v| v.parse().ok());
        let detail = f.next().filter(|d| !d.is_empty()).map(str::to_owned);
        self.events.push(Event { t_ns: t, who: "holder", what, fence, detail });
    }

    pub(super) fn signal(&self, sig: Signal) {
        if let Some(pid) = self.child.id() {
            let _ = kill(Pid::from_raw(pid as i32), sig);
        }
    }

    /// Drains the remaining event lines until the process exits (bounded).
    pub(super) async fn finish(&mut self) {
        let _ = tokio::time::timeout(Duration::from_secs(10), async {
            while let Ok(Some(l)) = self.lines.next_line().await {
                if let Some(rest) = l.strip_prefix("event ") {
                    self.record(rest);
                }
            }
        })
        .await;
        let _ = self.child.start_kill();
        let _ = self.child.wait().await;
    }
}
