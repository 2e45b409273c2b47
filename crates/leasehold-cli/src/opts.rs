//! The option groups several commands share: where the store is, the bound on every store
//! call, and a grant's length and wait.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use leasehold::Wait;

use crate::dur;

/// Where the store is.
#[derive(Args, Debug, Clone, Default)]
pub(crate) struct StoreOpt {
    /// Store URL (the forms are listed in `leasehold --help`); else --store-file, else
    /// $LEASEHOLD_STORE, else $LEASEHOLD_STORE_FILE, else the per-user embedded store.
    #[arg(long, value_name = "URL", conflicts_with = "store_file")]
    pub store: Option<String>,
    /// Read the store URL from the first line of PATH (e.g. a file of mode 0600), which keeps
    /// a password out of `ps` and shell history. Also $LEASEHOLD_STORE_FILE.
    #[arg(long, value_name = "PATH")]
    pub store_file: Option<PathBuf>,
}

/// The bound on every store call.
#[derive(Args, Debug, Clone, Copy)]
pub(crate) struct TimeoutOpt {
    /// Bound on connecting (name lookup, TCP, TLS, authentication) and on each store request;
    /// a store that does not answer within it is unavailable (exit 69).
    #[arg(long, default_value = "5s", value_parser = dur::parse_positive, value_name = "DUR",
          allow_hyphen_values = true)]
    pub timeout: Duration,
}

/// A grant's lease length and how long to wait for it.
#[derive(Args, Debug)]
pub(crate) struct GrantOpt {
    /// Lease length (`run` renews it every ttl/3; at least 100ms).
    #[arg(long, default_value = "30s", value_parser = dur::parse_positive, value_name = "DUR",
          allow_hyphen_values = true)]
    pub ttl: Duration,
    /// How long to wait for a busy key: a duration or `forever` (default: try once).
    #[arg(long, default_value = "0", value_parser = parse_wait, value_name = "DUR|forever",
          allow_hyphen_values = true)]
    pub wait: Wait,
}

fn parse_wait(s: &str) -> Result<Wait, String> {
    match s {
        "forever" => Ok(Wait::Forever),
        _ => dur::parse(s).map(|d| if d.is_zero() { Wait::No } else { Wait::For(d) }),
    }
}
