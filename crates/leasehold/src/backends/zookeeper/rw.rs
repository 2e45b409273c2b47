//! Readers and writers on the node layout of Curator's `InterProcessReadWriteLock`: a lock
//! node's children are `_c_<UUID>-lock-<SEQ>` (an `InterProcessMutex`), `_c_<UUID>-__WRIT__<SEQ>`
//! (the write lock) and `_c_<UUID>-__READ__<SEQ>` (a read lock), ordered by sequence alone.
//!
//! leasehold treats `lock-` and `__WRIT__` children alike (exclusive: held by the lowest child
//! of all), and a `__READ__` child as held while no exclusive child has a lower sequence, so a
//! waiting writer blocks every later reader (writer preference by sequence, as Curator's).
//! Which of the two exclusive names leasehold itself creates is the URL's `curator=` option:
//! Curator's mutex does not see `__WRIT__` children, nor its read-write lock `lock-` children.

use super::config::Curator;
use crate::Mode;

/// What a lock child is, by its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    /// `InterProcessMutex`'s `lock-`.
    Lock,
    /// `InterProcessReadWriteLock`'s write lock, `__WRIT__`.
    Write,
    /// `InterProcessReadWriteLock`'s read lock, `__READ__`.
    Read,
}

impl Kind {
    const ALL: [Kind; 3] = [Kind::Lock, Kind::Write, Kind::Read];

    /// The name part Curator puts before the sequence.
    pub(super) fn marker(self) -> &'static str {
        match self {
            Kind::Lock => "lock-",
            Kind::Write => "__WRIT__",
            Kind::Read => "__READ__",
        }
    }

    pub(super) fn exclusive(self) -> bool {
        self != Kind::Read
    }

    /// The kind of child a grant in `mode` creates, under the URL's `curator=` choice.
    pub(super) fn of(mode: Mode, curator: Curator) -> Kind {
        match (mode, curator) {
            (Mode::Shared, _) => Kind::Read,
            (_, Curator::Mutex) => Kind::Lock,
            (_, Curator::RwLock) => Kind::Write,
        }
    }
}

/// A lock child: its name, kind and sequence.
#[derive(Debug, Clone)]
pub(super) struct Child {
    pub name: String,
    pub kind: Kind,
    pub seq: i64,
}

/// The kind and sequence of a lock child (`…-lock-0000000042`), `None` for any other child.
pub(super) fn parse(name: &str) -> Option<Child> {
    Kind::ALL.into_iter().find_map(|kind| {
        let (_, s) = name.rsplit_once(kind.marker())?;
        let seq = s.parse().ok().filter(|_| s.bytes().all(|b| b.is_ascii_digit()))?;
        Some(Child { name: name.to_owned(), kind, seq })
    })
}

/// Lock children in Curator's order (by sequence).
pub(super) fn ordered(children: Vec<String>) -> Vec<Child> {
    let mut q: Vec<Child> = children.iter().filter_map(|c| parse(c)).collect();
    q.sort_by_key(|c| c.seq);
    q
}

/// What the child at `pos` waits for: `None` when it holds; else the child to watch (an
/// exclusive child waits for the one just before it, a reader for the last exclusive child
/// before it).
pub(super) fn blocker(queue: &[Child], pos: usize) -> Option<&Child> {
    if queue[pos].kind.exclusive() {
        pos.checked_sub(1).map(|p| &queue[p])
    } else {
        queue[..pos].iter().rev().find(|c| c.kind.exclusive())
    }
}

/// Whether a one-shot attempt in `mode` would have to wait behind `queue` (so it does not
/// join it): any child for an exclusive grant, any exclusive child for a reader.
pub(super) fn would_wait(queue: &[Child], mode: Mode) -> bool {
    match mode {
        Mode::Shared => queue.iter().any(|c| c.kind.exclusive()),
        _ => !queue.is_empty(),
    }
}

/// The children that hold: the first if exclusive, else every reader before the first
/// exclusive child.
pub(super) fn holding(queue: &[Child]) -> &[Child] {
    match queue.first() {
        Some(c) if c.kind.exclusive() => &queue[..1],
        _ => {
            let n = queue.iter().position(|c| c.kind.exclusive()).unwrap_or(queue.len());
            &queue[..n]
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(names: &[&str]) -> Vec<Child> {
        ordered(names.iter().map(|s| s.to_string()).collect())
    }

    #[test]
    fn curator_names_sort_by_sequence_whatever_their_kind() {
        let u = "_c_0b6b7b7e-6c1d-4a59-9a57-5d0c8e7e1f00-";
        let queue = q(&[
            &format!("{u}__READ__0000000007"),
            &format!("{u}lock-0000000003"),
            &format!("{u}__WRIT__0000000005"),
            "leases",
            &format!("{u}__READ__0000000001"),
        ]);
        let kinds: Vec<(Kind, i64)> = queue.iter().map(|c| (c.kind, c.seq)).collect();
        assert_eq!(
            kinds,
            [(Kind::Read, 1), (Kind::Lock, 3), (Kind::Write, 5), (Kind::Read, 7)],
            "non-lock children are left out"
        );
        assert!(blocker(&queue, 0).is_none(), "the first reader holds");
        assert_eq!(blocker(&queue, 1).unwrap().seq, 1, "a mutex waits for the reader before it");
        assert_eq!(blocker(&queue, 2).unwrap().seq, 3);
        assert_eq!(blocker(&queue, 3).unwrap().seq, 5, "a reader waits for the last writer");
        assert_eq!(holding(&queue).len(), 1);
        assert!(would_wait(&queue, Mode::Shared) && would_wait(&queue, Mode::Exclusive));
        let readers = q(&[&format!("{u}__READ__0000000001"), &format!("{u}__READ__0000000002")]);
        assert!(blocker(&readers, 1).is_none(), "readers overlap");
        assert_eq!(holding(&readers).len(), 2);
        assert!(!would_wait(&readers, Mode::Shared) && would_wait(&readers, Mode::Exclusive));
        assert!(parse(&format!("{u}lock-12x")).is_none() && parse(&format!("{u}lock-")).is_none());
    }
}
