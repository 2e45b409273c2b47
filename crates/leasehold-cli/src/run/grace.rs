//! How `run` fits `--grace` inside the lease: SIGKILL must land before the store may grant
//! the key to another holder, and the local deadline must still leave two renewals.
//!
//! The store may grant the key again from `t_sent + ttl·(1 − drift)` on (local time of the
//! request that last confirmed the lease). `run` sends SIGTERM at the local deadline
//! `D = t_sent + ttl·(1 − drift) − margin` and SIGKILL at `D + grace`, so
//! `margin = grace + slack` puts the SIGKILL `slack` (ttl/10, at most 2 s: timer and kill
//! latency) before that instant. Renewals run every ttl/3, so `D − t_sent ≥ 2·ttl/3`
//! leaves two of them before the deadline: `grace ≤ ttl·(1 − drift) − 2·ttl/3 − slack`.

use std::time::Duration;

use leasehold::LockKind;

use crate::dur::human;

/// Milliseconds exactly (`2970ms`), whole seconds as `2s`: arithmetic that adds up.
fn exact(d: Duration) -> String {
    let ms = d.as_millis();
    if ms.is_multiple_of(1000) { format!("{}s", ms / 1000) } else { format!("{ms}ms") }
}

/// The drift `run` assumes between this host's clock and the store's (the library default).
pub(crate) const DRIFT: f64 = 0.01;
/// `--grace` when not given (shortened to what fits a short ttl).
pub(crate) const DEFAULT_GRACE: Duration = Duration::from_secs(5);
/// The shortest `--ttl` `run` accepts: below it, one scheduling pause outlasts a renewal.
pub(crate) const MIN_TTL: Duration = Duration::from_millis(100);

/// The grace and the margin `run` acquires with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Plan {
    pub grace: Duration,
    /// For lease stores; `None` on session stores (no local deadline).
    pub margin: Option<Duration>,
}

fn slack(ttl: Duration) -> Duration {
    leasehold::default_margin(ttl)
}

/// The most grace a ttl leaves room for.
pub(crate) fn max_grace(ttl: Duration) -> Duration {
    ttl.mul_f64(1.0 - DRIFT).saturating_sub(ttl * 2 / 3).saturating_sub(slack(ttl))
}

/// The shortest ttl that fits `grace` (to the millisecond, rounded up).
fn min_ttl_for(grace: Duration) -> Duration {
    let mut ms = ((grace.as_secs_f64() / (1.0 - DRIFT - 2.0 / 3.0 - 0.1)) * 1000.0).ceil() as u64;
    if ms > 20_000 {
        ms = (((grace.as_secs_f64() + 2.0) / (1.0 - DRIFT - 2.0 / 3.0)) * 1000.0).ceil() as u64;
    }
    let mut t = Duration::from_millis(ms).max(MIN_TTL);
    while max_grace(t) < grace {
        t += Duration::from_millis(1);
    }
    t
}

/// The plan for `ttl` and `--grace` on a store of `kind`; the refusal (exit 64) says why,
/// with the arithmetic.
pub(crate) fn plan(ttl: Duration, grace: Option<Duration>, kind: LockKind) -> Result<Plan, String> {
    if ttl < MIN_TTL {
        return Err(format!(
            "--ttl {} is too short: `run` renews every ttl/3, and below {} a single scheduling \
             pause outlasts a renewal",
            human(ttl),
            human(MIN_TTL)
        ));
    }
    if kind != LockKind::Lease {
        // A session lock has no local deadline: the grace only spaces SIGTERM and SIGKILL
        // for what the command leaves behind; a lost session is answered with SIGKILL.
        return Ok(Plan { grace: grace.unwrap_or(DEFAULT_GRACE), margin: None });
    }
    let most = max_grace(ttl);
    let grace = match grace {
        None => DEFAULT_GRACE.min(most),
        Some(g) if g <= most => g,
        Some(g) => {
            return Err(format!(
                "--grace {} does not fit --ttl {}: SIGKILL must land before the store may grant \
                 the key again (ttl·(1 − {DRIFT}) = {} after the last renewal was sent), \
                 {} (ttl/10, at most 2s) earlier for the kill itself, and the local deadline \
                 (SIGTERM, grace before the SIGKILL) must leave two renewals (2·ttl/3 = {}): \
                 grace ≤ {} − {} − {} = {}. Use --grace {} or less, or --ttl {} or more",
                exact(g),
                exact(ttl),
                exact(ttl.mul_f64(1.0 - DRIFT)),
                exact(slack(ttl)),
                exact(ttl * 2 / 3),
                exact(ttl.mul_f64(1.0 - DRIFT)),
                exact(ttl * 2 / 3),
                exact(slack(ttl)),
                exact(most),
                exact(most),
                exact(min_ttl_for(g)),
            ));
        }
    };
    Ok(Plan { grace, margin: Some(grace + slack(ttl)) })
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: fn(u64) -> Duration = Duration::from_secs;
    const MS: fn(u64) -> Duration = Duration::from_millis;

    /// SIGKILL (deadline + grace) lands before ttl·(1 − drift), and the deadline leaves two
    /// renewals, for every ttl and the grace the plan picks.
    #[test]
    fn the_kill_lands_before_the_store_can_grant_and_two_renewals_fit() {
        for ttl_ms in [100, 250, 1000, 3000, 10_000, 30_000, 60_000, 3_600_000] {
            let ttl = MS(ttl_ms);
            for grace in [None, Some(MS(0)), Some(MS(10)), Some(max_grace(ttl))] {
                let p = plan(ttl, grace, LockKind::Lease).unwrap();
                let margin = p.margin.unwrap();
                let deadline = ttl.mul_f64(1.0 - DRIFT) - margin;
                assert!(deadline + p.grace < ttl.mul_f64(1.0 - DRIFT), "{ttl:?} {p:?}");
                assert!(deadline >= ttl * 2 / 3, "{ttl:?} {p:?}");
            }
        }
    }

    #[test]
    fn the_default_grace_shrinks_to_fit_and_an_explicit_one_is_refused() {
        assert_eq!(plan(S(30), None, LockKind::Lease).unwrap().grace, S(5));
        let short = plan(S(3), None, LockKind::Lease).unwrap();
        assert!(short.grace < S(1) && short.grace == max_grace(S(3)), "{short:?}");
        let e = plan(S(3), Some(S(5)), LockKind::Lease).unwrap_err();
        assert!(
            e.contains("does not fit") && e.contains("grace ≤ 2970ms − 2s − 300ms = 670ms"),
            "{e}"
        );
        // The suggested ttl is the shortest that fits.
        for g in [MS(10), S(1), S(5), S(60)] {
            let t = min_ttl_for(g);
            assert!(plan(t, Some(g), LockKind::Lease).is_ok(), "{g:?} {t:?}");
            assert!(plan(t - MS(1), Some(g), LockKind::Lease).is_err(), "{g:?} {t:?}");
        }
    }

    #[test]
    fn tiny_ttls_are_refused_and_session_stores_keep_the_grace() {
        assert!(plan(MS(1), None, LockKind::Lease).unwrap_err().contains("too short"));
        assert!(plan(MS(1), None, LockKind::Session).is_err());
        let p = plan(S(1), Some(S(60)), LockKind::Session).unwrap();
        assert_eq!(p, Plan { grace: S(60), margin: None });
    }
}
