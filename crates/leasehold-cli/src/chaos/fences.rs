//! The external fence source of a chaos run whose store issues no fence (a topology with
//! `external_fences`): one file shared by the tool and its holder processes, which every
//! locker of the run is opened with ([`stores::open_with_fence_file`]).

use std::path::PathBuf;
use std::sync::OnceLock;

use leasehold::Locker;
use leasehold_harness::stores;

/// Where a holder process finds the external fence source's file.
pub const ENV_FENCES: &str = "LEASEHOLD_CHAOS_FENCES";

/// This process's fence file (the successor's), set once by [`use_file`].
static FENCES: OnceLock<PathBuf> = OnceLock::new();

/// Connects to `url`, with the run's external fence source when there is one (this
/// process's, or a holder's from [`ENV_FENCES`]) and the store takes one.
pub(super) async fn connect(url: &str) -> leasehold::Result<Locker> {
    let file = FENCES.get().cloned().or_else(|| std::env::var_os(ENV_FENCES).map(PathBuf::from));
    match file {
        Some(f) => stores::open_with_fence_file(url, f).await,
        None => Locker::connect(url).await,
    }
}

/// The environment a holder process gets: the fence file, when the run has one.
pub(super) fn worker_env() -> Vec<(&'static str, PathBuf)> {
    FENCES.get().map(|f| (ENV_FENCES, f.clone())).into_iter().collect()
}

/// Makes `file` this process's fence file (once: a second, different file is an error).
pub(super) fn use_file(file: PathBuf) -> Result<(), String> {
    if FENCES.set(file.clone()).is_err() && FENCES.get() != Some(&file) {
        return Err("one fence file per process".into());
    }
    Ok(())
}
