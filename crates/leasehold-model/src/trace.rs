//! Readable traces: a path the checker found, one line per step in the protocol's words, with
//! real time, the store's clock and fences put back as absolute numbers (the state keeps them
//! relative, `canon.rs`): a fence is shown as the store-clock reading it was issued at.

use std::collections::HashMap;

use stateright::Path;

use crate::state::{Action, Phase, State};
use crate::{Broken, Protocol};

/// One line per step of `path`.
pub fn render(model: &Protocol, path: &Path<State, Action>) -> String {
    let mut out = String::new();
    let states = path.clone().into_states();
    let actions = path.clone().into_actions();
    let plain = model.config.broken == Broken::PlainCounter;
    // The store's clock starts at 100 (a fence of 0 would mean "no fence").
    let (mut now, mut clock) = (0i64, 100i64);
    // Absolute fence of each owner's grant, recorded when the store issues it.
    let mut fences: HashMap<u8, i64> = HashMap::new();
    for (n, (a, s)) in actions.iter().zip(states.iter().skip(1)).enumerate() {
        let before = &states[n];
        match *a {
            Action::Tick { .. } => {
                now += 1;
                clock += 1;
            }
            Action::Failover { skew } => clock -= i64::from(skew),
            Action::StepBack { by } => clock -= i64::from(by),
            _ => {}
        }
        let granted = matches!(a, Action::Acquire(_) | Action::AcquireUnanswered(_))
            && s.store.grant.is_some_and(|g| {
                before.store.grant.is_none_or(|b| b.owner != g.owner || b.expires <= 0)
            });
        if granted && let Some(g) = s.store.grant {
            fences.insert(
                g.owner,
                if plain { i64::from(g.fence) } else { clock + i64::from(g.fence) },
            );
        }
        let f = |owner: u8| fences.get(&owner).map_or("?".into(), |f| f.to_string());
        let line = describe(a, before, s, clock, &f);
        out.push_str(&format!("{:>3}. t={now:<2} {line}\n", n + 1));
    }
    out
}

fn who(i: u8) -> char {
    (b'A' + i) as char
}

fn describe(a: &Action, before: &State, s: &State, clock: i64, f: &dyn Fn(u8) -> String) -> String {
    let store = || match s.store.grant {
        Some(g) if g.expires > 0 => format!(
            "store: owner {} (fence {}) until store clock {} (now {clock})",
            g.owner,
            f(g.owner),
            clock + i64::from(g.expires)
        ),
        _ => format!("store: key free (store clock {clock})"),
    };
    let hold = |i: u8| match s.clients[usize::from(i)].phase {
        Phase::Holding(h) => format!(
            "owner {}, fence {}, {}",
            h.owner,
            f(h.owner),
            h.left.map_or("no local deadline".into(), |l| format!("local deadline in {l}"))
        ),
        _ => String::new(),
    };
    let phase = |i: u8| match s.clients[usize::from(i)].phase {
        Phase::Idle => "idle".to_string(),
        Phase::Waiting { .. } => "busy: waits".into(),
        Phase::Cleanup { owner } => format!("gives up owner {owner}: owner-checked release due"),
        Phase::Holding(_) => format!("holds: {}", hold(i)),
        Phase::Stopped => "stopped".into(),
    };
    let installed = || match s.installed {
        Some((o, _)) => format!("owner {o} fence {}", f(o)),
        None => "nothing".into(),
    };
    match *a {
        Action::Tick { slow: 0 } => "tick".into(),
        Action::Tick { slow } => {
            let names: String = (0..8).filter(|i| slow & (1 << i) != 0).map(who).collect();
            format!("tick; {names}'s clock loses this tick (drift)")
        }
        Action::Acquire(i) | Action::AcquireUnanswered(i) => {
            let lost = if matches!(a, Action::AcquireUnanswered(_)) { ", ANSWER LOST" } else { "" };
            format!("{} acquires{lost}: {}; {}", who(i), phase(i), store())
        }
        Action::Renew(i) => format!("{} renews: {}; {}", who(i), phase(i), store()),
        Action::RenewUnanswered(i) => format!("{} renews, ANSWER LOST; {}", who(i), store()),
        Action::RenewLost(i) => format!("{} renews, REQUEST LOST before the store", who(i)),
        Action::Timeout(i) => format!("{} times out on its renewal: {}", who(i), phase(i)),
        Action::Release(i) => format!("{} releases; {}", who(i), store()),
        Action::Cleanup(i) => {
            format!("{} sends its owner-checked background release; {}", who(i), store())
        }
        Action::Lost(i) => format!("{} passes its local deadline: lost", who(i)),
        Action::Claim(i) => format!("{} sends its claim ({})", who(i), hold(i)),
        Action::Effect(i) => format!("{} sends an effect ({})", who(i), hold(i)),
        Action::ClaimTimeout(i) => format!("{} times out waiting for its claim's answer", who(i)),
        Action::Apply(i) | Action::ApplyUnanswered(i) => {
            let m = before.clients[usize::from(i)].to_res;
            let what = m.map_or("message", |m| if m.claim { "claim" } else { "effect" });
            let lost = if matches!(a, Action::ApplyUnanswered(_)) { " (answer lost)" } else { "" };
            let verdict = verdict(before, s, i);
            format!("resource gets {}'s {what}: {verdict}{lost}; installed {}", who(i), installed())
        }
        Action::LoseRes(i) => format!("{}'s message to the resource is lost", who(i)),
        Action::Replicate => format!("the replica catches up ({})", store()),
        Action::Failover { skew } => {
            format!("FAILOVER: the replica takes over, its clock {skew} behind; {}", store())
        }
        Action::Forget => format!("the store forgets the idle key's counter ({})", store()),
        Action::StepBack { by } => format!("the store's clock steps back {by} ({})", store()),
    }
}

/// What the resource did with the message: judged from what changed.
fn verdict(before: &State, s: &State, i: u8) -> &'static str {
    let m = before.clients[usize::from(i)].to_res;
    match m {
        Some(m) if m.claim => {
            if s.installed == Some((m.owner, m.fence)) {
                "installed"
            } else if s.ghost.locked_out && !before.ghost.locked_out {
                "REFUSED (the current holder)"
            } else {
                "refused"
            }
        }
        Some(m) => {
            let accepted = before.installed == Some((m.owner, m.fence));
            match (accepted, s.ghost.latest == Some(m.owner)) {
                (true, true) => "accepted",
                (true, false) => "ACCEPTED (a newer grant exists)",
                (false, _) if s.ghost.locked_out && !before.ghost.locked_out => {
                    "REFUSED (the current holder)"
                }
                (false, _) => "refused",
            }
        }
        None => "-",
    }
}
