//! `leasehold run`: the command under a lease, behind a supervisor that kills it when the
//! lease runs out, is lost, or its holder dies.

mod at_least;
mod grace;
mod handle;
pub(crate) mod held;
pub(crate) mod metrics;
mod nested;
mod opts;
mod redact;
pub(crate) mod supervise;

use std::ffi::OsString;
use std::time::{Duration, Instant};

use leasehold::{Error, HolderInfo, LockKind, Locker, LostReason, Wait};
use tokio::signal::unix::{Signal, SignalKind, signal};

use crate::exit::{Exit, code};
use crate::opts::{GrantOpt, StoreOpt, TimeoutOpt};
use crate::status::escape;
use crate::{dur, store};
use handle::{Event, Supervisor};
use metrics::Outcome;
use nested::Parent;
pub(crate) use opts::{IfUnavailable, RunOpt};
use redact::{command_line, note_withheld, withheld_env};

/// Which store a `run` holds its key on, exported to the command so that a nested `run` can
/// tell its parent's store: the URL with any password redacted.
pub(crate) const ENV_STORE_ID: &str = "LEASEHOLD_STORE_ID";
/// Set (to anything but `0`), `run` records no holder info, as `--no-holder-info`.
pub(crate) const ENV_NO_HOLDER_INFO: &str = "LEASEHOLD_NO_HOLDER_INFO";

/// Set to `1`, `run` writes when each step between a command's end and the next holder's
/// start happens (`leasehold: timeline STEP NS` on stderr, NS in CLOCK_REALTIME
/// nanoseconds, comparable between processes): what `scripts/handoff` breaks the handoff
/// down with.
pub(crate) const ENV_TIMELINE: &str = "LEASEHOLD_TIMELINE";

/// One step of the timeline ([`ENV_TIMELINE`]); nothing unless it is set.
fn mark(step: &str) {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    if *ON.get_or_init(|| std::env::var_os(ENV_TIMELINE).is_some_and(|v| v == "1")) {
        let ns = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        eprintln!("leasehold: timeline {step} {ns}");
    }
}

/// `run --help`.
pub(crate) const ABOUT: &str = "\
Run CMD while holding KEY: flock(1) for a cluster.

Exports LEASEHOLD_KEY, LEASEHOLD_FENCE and LEASEHOLD_OWNER to the command and renews the
lease every ttl/3. The command does not get LEASEHOLD_STORE (the URL, password included;
LEASEHOLD_STORE_ID names the store, password redacted) nor any other variable carrying the
store URL or its password (named on stderr); LEASEHOLD_STORE_FILE, a path, is passed on, so
a nested run finds its store through it.

The command runs in a process group of its own under a small supervisor
(`leasehold supervise`) that holds a socket from `run`: if `run` dies for any reason (kill -9,
the OOM killer), the supervisor SIGKILLs the command and every process it started at once,
and once they are gone releases the key (owner-checked), so the next holder starts at once
as with flock rather than after the ttl (the store URL reaches it over that socket, never
argv or the environment). On Linux the supervisor is a child subreaper, so processes that
left the group (setsid, daemons) are found and killed too, and the command has
PR_SET_PDEATHSIG=SIGKILL should the supervisor itself be killed. Other Unix systems get the
process group only.

More primitives, same lease protocol (every grant fenced, renewed, lost and killed alike):
  leasehold run --permits 3 KEY -- CMD   one of 3 permits (a semaphore, as consul lock -n):
      LEASEHOLD_SLOT (0..2), LEASEHOLD_PERMITS, and LEASEHOLD_KEY=KEY#SLOT with that slot's
      LEASEHOLD_FENCE and LEASEHOLD_OWNER
  leasehold run --shared KEY -- CMD      a reader (flock -s): readers overlap; a plain run of
      KEY is the writer and runs alone; a waiting writer keeps new readers out (sqlite,
      redis); LEASEHOLD_MODE=shared
  leasehold run A B C -- CMD             all keys at once, taken in sorted order (no deadlock
      whatever order runs name them): LEASEHOLD_KEYS=3, then LEASEHOLD_KEY_0,
      LEASEHOLD_FENCE_0, LEASEHOLD_OWNER_0 … in sorted key order
A store that cannot hold a semaphore or readers refuses at once (exit 64); so does a
--permits N naming another N than the runs holding KEY.

When the lease runs out (a renewal not confirmed before the local deadline), the command's
processes get SIGTERM, then SIGKILL after --grace, and `run` exits 79. The supervisor keeps
that deadline itself, so a stalled `run` (SIGSTOP, swapping) still kills in time. The local
deadline is placed so that the SIGKILL lands before the store may grant the key to another
holder; a --grace or --ttl that cannot fit is refused (exit 64, with the arithmetic). When
the store says the key is no longer ours, or the session that held the lock ended, another
holder may already have it: SIGKILL at once, no grace. When the command exits, what it left
running gets SIGTERM, then SIGKILL after --grace, before the key is released: nothing the
job started runs without the lease.

Once the command has started, `run` exits with its code (128+N if it died of signal N), or 79
if the lease was lost meanwhile (or found not ours at release); a failed release is a
warning, never 69. A command that exits 75, 69, 78 or 79 itself is passed through: tell them
apart by leasehold's own `leasehold: ` line on stderr, or move the busy code with -E.

SIGINT, SIGTERM and SIGHUP are passed to the command's process group. SIGTERM stops the
run, as systemd stops a unit: if the command and what it started are still running --grace
after the first SIGTERM, they get SIGKILL (a second SIGTERM does not postpone it), and the
key is released. SIGINT and SIGHUP are only passed on. When stdin is a
terminal and `run` is in its foreground, the command's group becomes the terminal's
foreground group (and gives it back at the end), so a command that reads the terminal is not
stopped by SIGTTIN and Ctrl-C reaches it directly.

Once per period with cron: `leasehold run --at-least 50m -E 0 hourly-report -- ./report.sh`
on every host runs the job on one host per hour; the others find the key busy and exit 0
quietly. --wait instead makes the others wait and then run the job too, one after another.

Nested in a `run` of the same KEY on the same store (LEASEHOLD_KEY, LEASEHOLD_OWNER and
LEASEHOLD_STORE_ID in the environment, and the store confirming that grant), the command runs
at once under the parent's grant, with the same fence, instead of waiting on its own parent.
A nested run of another key acquires as usual.

Holder info: beside every grant, where the store keeps it, `run` records its host, pid,
start time and command line (256 bytes at most, arguments that look like secrets redacted:
URL userinfo, --password/-p/--token/--secret/--*key* values, NAME=VALUE pairs with such
names, Authorization headers), shown by `status` and a busy run's message to anyone who can
read the store. --no-holder-info or LEASEHOLD_NO_HOLDER_INFO=1 records none.

The default store is per user (see `leasehold --help`): another user's run of the same key
does not exclude this one; set LEASEHOLD_STORE for one store per machine or cluster.";

/// SIGINT, SIGTERM and SIGHUP, to pass on.
pub(super) struct Signals {
    int: Signal,
    term: Signal,
    hup: Signal,
}

impl Signals {
    fn install() -> Result<Self, Exit> {
        let sig = |k| {
            signal(k).map_err(|e| {
                Exit::fail(code::SOFTWARE, format!("cannot install signal handler: {e}"))
            })
        };
        Ok(Signals {
            int: sig(SignalKind::interrupt())?,
            term: sig(SignalKind::terminate())?,
            hup: sig(SignalKind::hangup())?,
        })
    }

    /// The next one, as its number.
    pub(super) async fn recv(&mut self) -> i32 {
        tokio::select! {
            _ = self.int.recv() => nix::libc::SIGINT,
            _ = self.term.recv() => nix::libc::SIGTERM,
            _ = self.hup.recv() => nix::libc::SIGHUP,
        }
    }
}

/// Whether `run` records who holds the key (host, pid, command): not with
/// `--no-holder-info` or `LEASEHOLD_NO_HOLDER_INFO` set (to anything but `0` or nothing).
fn records_holder_info(opt: &RunOpt) -> bool {
    let env_off = std::env::var(ENV_NO_HOLDER_INFO).is_ok_and(|v| !v.is_empty() && v != "0");
    !opt.no_holder_info && !env_off
}

/// Runs the command under the lease: how `run` exits, and the outcome for the metrics.
pub(crate) async fn run(
    store: StoreOpt,
    timeout: TimeoutOpt,
    grant: GrantOpt,
    opt: &RunOpt,
    keys: Vec<String>,
    command: Vec<OsString>,
) -> (Result<Exit, Exit>, Outcome) {
    let mut said = None;
    let r = run_under_lease(store, timeout, grant, opt, keys, command, &mut said).await;
    let outcome = said.unwrap_or_else(|| Outcome::of(&r));
    (r, outcome)
}

/// [`run`]; `said` is set where the exit code alone cannot tell the outcome (a busy key
/// skipped with `-E N`, whatever N).
async fn run_under_lease(
    store: StoreOpt,
    TimeoutOpt { timeout }: TimeoutOpt,
    GrantOpt { ttl, wait }: GrantOpt,
    opt: &RunOpt,
    keys: Vec<String>,
    command: Vec<OsString>,
    said: &mut Option<Outcome>,
) -> Result<Exit, Exit> {
    let usage = |m: String| Exit::fail(code::USAGE, m);
    let key = keys.join(" ");
    let single = keys.len() == 1 && opt.permits.is_none() && !opt.shared;
    if keys.len() > 1 && (opt.permits.is_some() || opt.shared) {
        return Err(usage("--permits and --shared take one KEY".into()));
    }
    if opt.at_least.is_some() && !single {
        return Err(usage("--at-least takes one KEY, without --permits or --shared".into()));
    }
    if opt.at_least.is_some_and(|d| d > leasehold::MAX_TTL) {
        return Err(usage("--at-least is longer than a lease can be (one year)".into()));
    }
    // Refused before any connection: nothing fits in it.
    grace::plan(ttl, opt.grace, LockKind::Session).map_err(usage)?;
    let resolved = store::resolve(&store)?;
    let url = resolved.url;
    let store_id = url.to_string();
    if resolved.default
        && let Ok(parent) = std::env::var(ENV_STORE_ID)
        && parent != store_id
    {
        // Nested in a run on another store, which did not pass LEASEHOLD_STORE on: locking
        // the per-user default instead would exclude nothing.
        return Err(usage(format!(
            "nested in a run on {parent}, but no store is given here: `run` does not pass \
             LEASEHOLD_STORE to its command (it may hold a password); give the store with \
             --store-file or LEASEHOLD_STORE_FILE (passed on), or --store"
        )));
    }
    let withheld = withheld_env(url.expose(), std::env::vars_os());
    let fail_open = |e: &Error| fails_open(e, opt.if_unavailable);
    // `e` says "store unavailable: …" (or "outcome unknown: …") itself.
    let warn_open = |e: &Error| {
        eprintln!(
            "leasehold: warning: {e}; running the command WITHOUT a lease on {key:?} \
             (--if-unavailable run)"
        )
    };
    let info = records_holder_info(opt)
        .then(|| HolderInfo::this_process().with_command(command_line(&command)));
    let locker = match Locker::open(&url, timeout).await {
        Ok(l) => l.with_op_timeout(timeout).with_holder_info(info),
        Err(e) if fail_open(&e) => {
            warn_open(&e);
            return Err(nested::exec(&command, None, &withheld));
        }
        Err(e) => return Err(e.into()),
    };
    let kind = locker.guarantees().kind;
    let plan = grace::plan(ttl, opt.grace, kind).map_err(usage)?;
    let busy_code = opt.conflict_exit_code.unwrap_or(code::BUSY);
    let parent = match single {
        true => nested::parents_grant(&locker, &key, &store_id).await,
        false => Parent::None,
    };
    match parent {
        Parent::None => {}
        // Nested in a run of the same key: the parent's grant covers this command.
        Parent::Confirmed(fence) => return Err(nested::exec(&command, Some(fence), &withheld)),
        Parent::Unconfirmable(e) => {
            *said = Some(Outcome::Busy);
            return Err(Exit::fail(
                busy_code,
                format!(
                    "nested in a run of {key:?}, but the store cannot confirm that grant ({e}); \
                     not waiting on the parent"
                ),
            ));
        }
    }
    let acquire = |wait: Wait| {
        let ask = held::Ask {
            keys: &keys,
            permits: opt.permits,
            shared: opt.shared,
            ttl,
            wait,
            margin: plan.margin,
        };
        let locker = &locker;
        async move { held::acquire(locker, &ask).await }
    };
    // The round trip says whether the ttl leaves renewals room: the acquire's own when it
    // does not wait, else one status request's.
    // Orphans of a killed supervisor come to this process, which then kills them.
    #[cfg(target_os = "linux")]
    let _ = nix::sys::prctl::set_child_subreaper(true);
    // A run that waits starts its supervisor now (it starts the command on `go`), so that the
    // handoff from the previous holder does not wait for this binary to start again.
    let mut early = match wait {
        Wait::No => None,
        _ => Some(Supervisor::spawn(&command, &withheld, plan.grace).map_err(|e| {
            Exit::fail(code::SOFTWARE, format!("cannot start the supervisor: {e}"))
        })?),
    };
    let sent = Instant::now();
    let (acquired, rtt) = if wait == Wait::No {
        let a = acquire(wait).await;
        (a, sent.elapsed())
    } else {
        let _ = locker.holders(Some(&keys[0])).await;
        let rtt = sent.elapsed();
        (acquire(wait).await, rtt)
    };
    let measured = acquired.is_ok();
    let lease = match acquired {
        Ok(lease) => lease,
        Err(e) if fail_open(&e) => {
            warn_open(&e);
            // The acquire's owner-checked cleanup is in flight; exec ends it, and the
            // store's expiry is the backstop.
            let _ = tokio::time::timeout(Duration::from_millis(200), locker.close()).await;
            return Err(nested::exec(&command, None, &withheld));
        }
        Err(Error::Busy { .. }) if opt.conflict_exit_code.is_some() => {
            *said = Some(Outcome::Skipped);
            return Err(Exit::ok(busy_code));
        }
        Err(Error::Busy { key: k } | Error::HeldByThisLocker { key: k, .. }) => {
            *said = Some(Outcome::Busy);
            return Err(Exit::fail(busy_code, busy_line(&locker, k.as_str()).await));
        }
        Err(e) => return Err(e.into()),
    };
    let granted = Instant::now();
    mark("granted");
    if measured && kind == LockKind::Lease {
        if rtt * 3 > ttl {
            let _ = lease.release().await;
            return Err(usage(format!(
                "--ttl {} is below what this store needs: a round trip took {}, and renewals \
                 (bounded by ttl/3 = {}) could not be confirmed",
                dur::human(ttl),
                dur::human(rtt),
                dur::human(ttl / 3)
            )));
        }
        if rtt * 10 > ttl {
            eprintln!(
                "leasehold: warning: a round trip took {} of --ttl {}: a slower one loses \
                 the lease",
                dur::human(rtt),
                dur::human(ttl)
            );
        }
    }

    let mut signals = Signals::install()?;
    let mut env = lease.env();
    env.push((ENV_STORE_ID.to_owned(), store_id.clone()));
    let env: Vec<(&str, String)> = env.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
    note_withheld(&withheld);
    let spawned =
        early.take().map_or_else(|| Supervisor::spawn(&command, &withheld, plan.grace), Ok);
    let mut sup = match spawned {
        Ok(mut s) => {
            s.go(&env).await;
            mark("supervisor-spawned");
            s
        }
        Err(e) => {
            let _ = lease.release().await;
            return Err(Exit::fail(code::SOFTWARE, format!("cannot start the supervisor: {e}")));
        }
    };
    // Should `run` die while the command runs, the supervisor releases the key once the
    // command is gone, so the next holder starts at once, as with flock. Session locks on
    // file://, PostgreSQL and MySQL end with this process's connection anyway; a session the
    // store keeps on its servers (its `session_timeout`: etcd's, ZooKeeper's) lives on until
    // it times out, so those are released too.
    if kind == LockKind::Lease || url.session_timeout().is_some() {
        let order = supervise::ReleaseOrder {
            url: url.expose().to_owned(),
            timeout_ms: timeout.as_millis() as u64,
            grants: lease.grants(),
        };
        sup.release_on_exit(&order).await;
    }
    let prog = command[0].to_string_lossy().into_owned();
    match sup.next().await {
        Event::Started(_) => mark("started"),
        other => {
            let _ = lease.release().await;
            let _ = sup.child.wait().await;
            return Err(match other {
                Event::SpawnFailed(true, e) => {
                    Exit::fail(code::NOT_FOUND, format!("cannot run {prog}: {e}"))
                }
                Event::SpawnFailed(false, e) => {
                    Exit::fail(code::CANNOT_EXECUTE, format!("cannot run {prog}: {e}"))
                }
                _ => Exit::fail(code::SOFTWARE, "the supervisor did not start the command"),
            });
        }
    }

    let ended = watch(&mut sup, &lease, &key, plan.grace, &mut signals).await;
    mark("ended");
    let (status, lost) = match ended {
        Watched::Ended(status, lost) => (status, lost),
        Watched::SupervisorGone => {
            let _ = sup.child.wait().await;
            #[cfg(target_os = "linux")]
            supervise::tree::kill_below(
                std::process::id() as i32,
                Duration::from_secs(2),
                &mut || {},
            );
            let _ = lease.release().await;
            return Err(Exit::fail(
                code::SOFTWARE,
                format!("the supervisor of {prog} died; everything the command started was killed"),
            ));
        }
    };
    if let Some(reason) = lost {
        let _ = sup.child.wait().await;
        let _ = lease.release().await;
        let _ = tokio::time::timeout(Duration::from_secs(1), locker.close()).await;
        return Err(Exit::fail(
            code::LOST,
            format!("lease on {key:?} lost ({reason}); the command was terminated"),
        ));
    }
    let not_ours = || {
        Exit::fail(
            code::LOST,
            format!(
                "the lease on {key:?} was no longer ours when the command ended: it may have \
                 overlapped with another holder"
            ),
        )
    };
    let released = match (opt.at_least, lease) {
        (Some(d), held::Held::One(lease, _)) => {
            match at_least::hold(&locker, lease, granted + d, &mut signals).await {
                at_least::Held::Kept => Ok(true),
                at_least::Held::Released(r) => r,
                at_least::Held::NotOurs => Ok(false),
                at_least::Held::Failed(e) => {
                    eprintln!(
                        "leasehold: warning: could not keep {key:?} for --at-least ({e}); its ttl \
                     frees it"
                    );
                    Ok(true)
                }
            }
        }
        (_, lease) => lease.release().await.map(|r| r.is_clean()),
    };
    mark("released");
    // The command and everything it started are gone (the supervisor says so only then), so
    // the release did not wait for the supervisor's own exit, a millisecond of each handoff.
    let _ = sup.child.wait().await;
    // A release sent in the background gets a short while; the store's expiry is the
    // backstop, and exit does not wait again.
    let _ = tokio::time::timeout(Duration::from_secs(1), locker.close()).await;
    match released {
        Ok(true) => {}
        Ok(false) => return Err(not_ours()),
        Err(e) => {
            eprintln!("leasehold: warning: release of {key:?} failed ({e}); its TTL will free it")
        }
    }
    Ok(Exit::ok(status))
}

/// Whether `run` runs the command without a lease after `e`: only for an outage (cannot
/// connect, no answer in time) and only when asked; a refused configuration never.
fn fails_open(e: &Error, mode: IfUnavailable) -> bool {
    mode == IfUnavailable::Run && e.is_unavailable() && !e.is_config()
}

/// How watching the command ended.
enum Watched {
    /// Its code (128+N for signal N), and the loss, if the lease was lost meanwhile.
    Ended(u8, Option<LostReason>),
    SupervisorGone,
}

/// Relays deadlines and signals to the supervisor and acts on a loss until the command and
/// everything it started have ended.
async fn watch(
    sup: &mut Supervisor,
    lease: &held::Held,
    key: &str,
    grace: Duration,
    signals: &mut Signals,
) -> Watched {
    let mut sent_deadline = lease.deadline();
    if let Some(d) = sent_deadline {
        sup.deadline(d).await;
    }
    let every = (lease.ttl() / 20).clamp(Duration::from_millis(10), Duration::from_secs(1));
    let mut tick = tokio::time::interval(every);
    let lost = lease.lost();
    tokio::pin!(lost);
    let mut lost_reason: Option<LostReason> = None;
    let mut said_term = false;
    loop {
        tokio::select! {
            ev = sup.next() => match ev {
                Event::Ended(code) => return Watched::Ended(code, lost_reason),
                Event::Gone => return Watched::SupervisorGone,
                Event::Leftover(n) => eprintln!(
                    "leasehold: the command exited and left {n} process(es) running; SIGTERM, \
                     then SIGKILL after {}, before {key:?} is released",
                    dur::human(grace)
                ),
                Event::DeadlineTerm if !said_term => {
                    said_term = true;
                    eprintln!(
                        "leasehold: the local deadline of {key:?} passed without a confirmed \
                         renewal; SIGTERM to the command, SIGKILL in {}",
                        dur::human(grace)
                    );
                }
                Event::DeadlineKill => eprintln!(
                    "leasehold: the command outlived --grace {}; SIGKILL", dur::human(grace)
                ),
                Event::StopKill => eprintln!(
                    "leasehold: the command outlived --grace {} after SIGTERM; SIGKILL to it \
                     and every process it started",
                    dur::human(grace)
                ),
                _ => {}
            },
            reason = &mut lost, if lost_reason.is_none() => {
                match reason {
                    LostReason::DeadlinePassed => {
                        if !said_term {
                            said_term = true;
                            eprintln!(
                                "leasehold: lease on {key:?} lost ({reason}); SIGTERM to the \
                                 command, SIGKILL in {}",
                                dur::human(grace)
                            );
                        }
                        sup.term().await;
                    }
                    _ => {
                        eprintln!(
                            "leasehold: lease on {key:?} lost ({reason}); another holder may have \
                             it already: SIGKILL to the command at once"
                        );
                        sup.kill().await;
                    }
                }
                lost_reason = Some(reason);
            }
            _ = tick.tick(), if sent_deadline.is_some() && lost_reason.is_none() => {
                let now = lease.deadline();
                if now != sent_deadline && let Some(d) = now {
                    sup.deadline(d).await;
                    sent_deadline = now;
                }
            }
            // SIGTERM is a stop, as from systemd or kill(1): the command gets it, and
            // SIGKILL --grace later, so a job that ignores it cannot keep the key.
            n = signals.recv() => match n {
                nix::libc::SIGTERM => sup.stop().await,
                n => sup.signal(n).await,
            },
        }
    }
}

/// `busy` with who holds the key, where the store says.
async fn busy_line(locker: &Locker, key: &str) -> String {
    let who = match tokio::time::timeout(Duration::from_secs(1), locker.holders(Some(key))).await {
        Ok(Ok(h)) => h
            .into_iter()
            .next()
            .and_then(|h| h.info)
            .map(|i| format!(" by {} pid {} ({})", escape(&i.host), i.pid, escape(&i.command))),
        _ => None,
    };
    format!("busy: {key:?} is held{}", who.unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_outage_fails_open_and_a_refused_configuration_exits_78() {
        let config = Error::Config { message: "WRONGPASS".into(), source: None };
        let outage = Error::Unavailable { message: "connection refused".into(), source: None };
        assert!(!fails_open(&config, IfUnavailable::Run));
        assert!(fails_open(&outage, IfUnavailable::Run));
        assert!(!fails_open(&outage, IfUnavailable::Fail));
        assert!(!fails_open(
            &Error::Busy { key: leasehold::Key::new("k").unwrap() },
            IfUnavailable::Run
        ));
        assert_eq!(Exit::from(config).code, code::CONFIG);
    }
}
