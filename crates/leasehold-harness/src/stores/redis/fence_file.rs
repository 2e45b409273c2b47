//! An external fence source for Redlock, whose instances issue no fence: a file shared by
//! every process of a run (chaos's tool and its holders).

use std::io::{Read as _, Seek as _, Write as _};
use std::path::PathBuf;

use leasehold::backends::redis::redlock::FenceSource;
use leasehold::{FenceRepeat, FenceToken, Key};

/// Fences from a file shared by every process of a run: `max(last + 1, clock µs)` under an
/// exclusive `flock`, written and synced before it is handed out, so it never goes back
/// while the file lasts (and, clock-backed, after that too).
#[derive(Debug)]
pub struct FileFences(pub PathBuf);

#[async_trait::async_trait]
impl FenceSource for FileFences {
    async fn next(&self, _: &Key) -> leasehold::Result<FenceToken> {
        let path = self.0.clone();
        let next = tokio::task::spawn_blocking(move || bump(&path))
            .await
            .map_err(|e| e.to_string())
            .and_then(|r| r.map_err(|e| e.to_string()));
        next.map(FenceToken::new).map_err(|e| leasehold::Error::Unavailable {
            message: format!("fence file: {e}"),
            source: None,
        })
    }
    fn promise(&self) -> FenceRepeat {
        FenceRepeat::ClockBacked
    }
}

fn bump(path: &std::path::Path) -> std::io::Result<u64> {
    use nix::fcntl::{Flock, FlockArg};
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)?;
    let mut f = Flock::lock(file, FlockArg::LockExclusive).map_err(|(_, e)| e)?;
    let mut s = String::new();
    f.read_to_string(&mut s)?;
    let last: u64 = s.trim().parse().unwrap_or(0);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64);
    let next = (last + 1).max(now);
    f.set_len(0)?;
    f.rewind()?;
    write!(f, "{next}")?;
    f.sync_data()?;
    Ok(next)
}
