//! SQLite in the tools: the resource every build has, a file of chaos's own (stores with no
//! resource of their own and the store-failure scenarios write to it).

use std::path::Path;

use leasehold::Scheme;

use crate::kit::{ResourceSpec, StoreKit};

pub mod resource;

/// SQLite's entry in [`super::KITS`].
pub struct Kit;

impl StoreKit for Kit {
    fn schemes(&self) -> &'static [Scheme] {
        &[Scheme::Sqlite]
    }

    /// Its waiters in other processes are woken by the store: measure one connection each.
    fn handoff_per_connection(&self) -> bool {
        true
    }
}

/// The resource file in `out` (`resource.db`), as a spec.
pub fn resource_in(out: &Path) -> ResourceSpec {
    let p = out.join("resource.db");
    ResourceSpec {
        spec: format!("{}{}", resource::PREFIX, p.display()),
        what: format!("SQLite file {} (table data)", p.display()),
        transactional: true,
    }
}

/// Whether `spec` is the tool's own SQLite resource file (which a run starts fresh, since
/// an earlier run's fences, from another store, are not comparable).
pub fn is_own_file(spec: &str) -> bool {
    spec.starts_with(resource::PREFIX)
}

/// Removes the tool's own SQLite resource file in `out` (and its `-wal` and `-shm`).
pub fn remove_file_in(out: &Path) {
    for ext in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(out.join(format!("resource.db{ext}")));
    }
}
