//! Readable traces of the reader-writer and semaphore models: one line per step, with the
//! store's grants after it. Owners are `client * 8 + n` (A's 1, 0, B's 9, 8, C's 17, 16); the
//! store's clock reads 100 + t µs, so a fence is `max(counter + 1, 100 + t)`.

use stateright::Path;

use crate::rw::{RwAction, RwPhase, RwState};
use crate::sem::{SemAction, SemState};

fn who(i: u8) -> char {
    (b'A' + i) as char
}

/// One line per step of a reader-writer path.
pub fn render_rw(path: &Path<RwState, RwAction>) -> String {
    let states = path.clone().into_states();
    let mut out = String::new();
    for (n, (a, s)) in path.clone().into_actions().iter().zip(states.iter().skip(1)).enumerate() {
        let before = &states[n];
        let what = match *a {
            RwAction::Tick => "tick".to_string(),
            RwAction::Acquire(i, _) | RwAction::Retry(i) => {
                // After an attempt the client waits or holds, in the mode it asked for.
                let w = matches!(
                    s.clients[usize::from(i)].phase,
                    RwPhase::Waiting { writer: true, .. } | RwPhase::Holding { writer: true, .. }
                );
                let how = if matches!(a, RwAction::Retry(_)) { "retries" } else { "asks" };
                let role = if w { "writer" } else { "reader" };
                let got = match s.clients[usize::from(i)].phase {
                    RwPhase::Holding { grant, .. } => format!("GRANTED fence {}", grant.fence),
                    _ if s.intent != before.intent && s.intent.is_some() => {
                        "refused, records its intent".into()
                    }
                    _ => "refused, waits".into(),
                };
                format!("{} {how} as {role}: {got}", who(i))
            }
            RwAction::GiveUp(i) => format!("{} gives up waiting", who(i)),
            RwAction::Renew(i) => format!("{} renews", who(i)),
            RwAction::Release(i) => format!("{} releases", who(i)),
            RwAction::Claim(i) => format!("{} sends its claim", who(i)),
            RwAction::Effect(i) => format!("{} sends an effect", who(i)),
            RwAction::Deliver(i) => {
                let m = before.clients[usize::from(i)].to_res.as_ref().map(|m| m.is_claim());
                let kind = if m == Some(true) { "claim" } else { "effect" };
                format!("resource gets {}'s {kind}; installed {:?}", who(i), s.installed())
            }
        };
        let t = s.now();
        out.push_str(&format!("{:>3}. t={t} {what}; store: {}\n", n + 1, s.summary()));
    }
    out
}

/// One line per step of a semaphore path.
pub fn render_sem(path: &Path<SemState, SemAction>) -> String {
    let states = path.clone().into_states();
    let mut out = String::new();
    for (n, (a, s)) in path.clone().into_actions().iter().zip(states.iter().skip(1)).enumerate() {
        let what = match *a {
            SemAction::Tick => "tick".to_string(),
            SemAction::Acquire(i, k) => {
                format!("{} GRANTED slot {k}, fence {}", who(i), s.fence_of(i).unwrap_or(0))
            }
            SemAction::Release(i) => format!("{} releases", who(i)),
        };
        let t = s.now();
        out.push_str(&format!("{:>3}. t={t} {what}; {}\n", n + 1, s.summary()));
    }
    out
}
