//! Symmetry: in a safety run the clients are interchangeable, so a state and the same state
//! with the clients renumbered (their owner tokens with them) have the same futures. The
//! checker keeps one representative of each such class (`leasehold-model --symmetry`, DFS).
//! Not for a liveness run, whose clients play different parts.

use crate::state::{Phase, State};

/// The state with client `c` renumbered `perm[c]`, and each owner token `c * 8 + n` with it.
fn permuted(s: &State, perm: &[u8]) -> State {
    let owner = |o: u8| perm[usize::from(o / 8)] * 8 + o % 8;
    let mut t = s.clone();
    for (c, client) in s.clients.iter().enumerate() {
        let mut k = *client;
        k.phase = match k.phase {
            Phase::Waiting { owner: o } => Phase::Waiting { owner: owner(o) },
            Phase::Cleanup { owner: o } => Phase::Cleanup { owner: owner(o) },
            Phase::Holding(mut h) => {
                h.owner = owner(h.owner);
                Phase::Holding(h)
            }
            p => p,
        };
        if let Some(m) = &mut k.to_res {
            m.owner = owner(m.owner);
        }
        t.clients[usize::from(perm[c])] = k;
    }
    for data in [&mut t.store, &mut t.replica] {
        if let Some(g) = &mut data.grant {
            g.owner = owner(g.owner);
        }
    }
    if let Some((o, _)) = &mut t.installed {
        *o = owner(*o);
    }
    t.ghost.latest = t.ghost.latest.map(owner);
    t
}

/// The least of the state's renumberings: the one the checker keeps.
pub fn representative(s: &State) -> State {
    let n = s.clients.len() as u8;
    let mut best = s.clone();
    let mut perm: Vec<u8> = (0..n).collect();
    // Heap's algorithm over the n! renumberings (n is 2 or 3).
    let mut c = vec![0usize; perm.len()];
    let mut i = 0;
    while i < perm.len() {
        if c[i] < i {
            perm.swap(if i % 2 == 0 { 0 } else { c[i] }, i);
            let t = permuted(s, &perm);
            if t < best {
                best = t;
            }
            c[i] += 1;
            i = 0;
        } else {
            c[i] = 0;
            i += 1;
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Config, Protocol};
    use stateright::Model;

    #[test]
    fn renumbering_twice_is_the_identity_and_the_representative_is_shared() {
        let m = Protocol::new(Config { clients: 3, ..Config::lock() });
        let mut s = m.init_states().remove(0);
        // A few steps in, so that owners appear in the store and the clients differ.
        for _ in 0..6 {
            let mut acts = Vec::new();
            m.actions(&s, &mut acts);
            let a =
                *acts.iter().find(|a| !matches!(a, crate::Action::Tick { .. })).unwrap_or(&acts[0]);
            s = m.next_state(&s, a).unwrap();
        }
        let swap = permuted(&s, &[1, 0, 2]);
        assert_eq!(permuted(&swap, &[1, 0, 2]), s);
        assert_eq!(representative(&swap), representative(&s));
    }
}
