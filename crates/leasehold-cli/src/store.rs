//! Which store a command talks to (`--store`, `--store-file`, the environment, the per-user
//! default) and the bounded connect every store-touching command goes through.

use std::path::{Path, PathBuf};
use std::time::Duration;

use leasehold::{Locker, StoreUrl};

use crate::exit::{Exit, code};
use crate::opts::StoreOpt;

/// The store URL from the environment (`chaos` hands it to its children this way, never on
/// their command line).
pub(crate) const ENV_STORE: &str = "LEASEHOLD_STORE";
/// A file whose first line is the store URL.
pub(crate) const ENV_STORE_FILE: &str = "LEASEHOLD_STORE_FILE";

/// A resolved store URL, parsed (its options checked) once, and whether it is the per-user
/// default.
#[derive(Debug, Clone)]
pub(crate) struct Store {
    pub url: StoreUrl,
    pub default: bool,
}

impl Store {
    /// One line saying what the default store is, for `status` and warnings.
    pub fn scope_note(&self) -> Option<String> {
        self.default.then(|| {
            format!(
                "store: {} (the per-user default: other users' runs do not see these keys; set \
                 LEASEHOLD_STORE for one store per machine)",
                self.url
            )
        })
    }
}

/// `--store`, else `--store-file`, else `$LEASEHOLD_STORE`, else `$LEASEHOLD_STORE_FILE`,
/// else the per-user SQLite file under `$XDG_STATE_HOME`; parsed once, here.
pub(crate) fn resolve(opt: &StoreOpt) -> Result<Store, Exit> {
    if let Some(s) = &opt.store {
        return Ok(Store { url: StoreUrl::parse(s)?, default: false });
    }
    if let Some(p) = &opt.store_file {
        return read_file(p, "--store-file");
    }
    if let Ok(s) = std::env::var(ENV_STORE)
        && !s.is_empty()
    {
        return Ok(Store { url: StoreUrl::parse(&s)?, default: false });
    }
    if let Some(p) = std::env::var_os(ENV_STORE_FILE).filter(|p| !p.is_empty()) {
        return read_file(Path::new(&p), ENV_STORE_FILE);
    }
    let state = std::env::var_os("XDG_STATE_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/state")))
        .ok_or_else(|| {
            Exit::fail(
                code::USAGE,
                "no --store, no $LEASEHOLD_STORE, and no $HOME for the default store",
            )
        })?;
    let url = format!("sqlite://{}", state.join("leasehold").join("leasehold.db").display());
    Ok(Store { url: StoreUrl::parse(&url)?, default: true })
}

/// The URL on the first line of `path` (surrounding whitespace dropped). A file others can
/// read gets a warning: it holds a password, or will.
fn read_file(path: &Path, what: &str) -> Result<Store, Exit> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        Exit::fail(code::USAGE, format!("{what}: cannot read {}: {e}", path.display()))
    })?;
    let url = text.lines().map(str::trim).find(|l| !l.is_empty()).unwrap_or("");
    if url.is_empty() {
        return Err(Exit::fail(
            code::USAGE,
            format!("{what}: {} holds no store URL", path.display()),
        ));
    }
    use std::os::unix::fs::PermissionsExt;
    if let Ok(meta) = std::fs::metadata(path)
        && meta.permissions().mode() & 0o077 != 0
        && url.contains('@')
    {
        eprintln!(
            "leasehold: warning: {what} {} is readable by others (mode {:o}); chmod 600 it",
            path.display(),
            meta.permissions().mode() & 0o777
        );
    }
    Ok(Store { url: StoreUrl::parse(url)?, default: false })
}

/// Connects with every step bounded by `timeout`, which also bounds each request after.
pub(crate) async fn connect(url: &StoreUrl, timeout: Duration) -> Result<Locker, Exit> {
    Ok(Locker::open(url, timeout).await?.with_op_timeout(timeout))
}

/// [`resolve`] then [`connect`].
pub(crate) async fn open(opt: &StoreOpt, timeout: Duration) -> Result<(Store, Locker), Exit> {
    let store = resolve(opt)?;
    let locker = connect(&store.url, timeout).await?;
    Ok((store, locker))
}
