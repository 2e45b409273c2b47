//! The progress line on stderr: shown only once a run has taken a second, rewritten in place
//! with `\r`, and cleared at the end so the report starts on a clean line.

use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread::JoinHandle;
use std::time::Duration;

/// Runs shorter than this show no progress at all.
const QUIET_FOR: Duration = Duration::from_secs(1);
const EVERY: Duration = Duration::from_millis(100);

/// Files and lines reviewed so far, shared by the workers.
#[derive(Default)]
pub(crate) struct Counters {
    files: AtomicU64,
    lines: AtomicU64,
}

impl Counters {
    pub(crate) fn add(&self, lines: usize) {
        self.files.fetch_add(1, Ordering::Relaxed);
        self.lines.fetch_add(lines as u64, Ordering::Relaxed);
    }
}

/// The thread printing the line; [`Progress::finish`] stops it and clears the line.
pub(crate) struct Progress {
    stop: mpsc::Sender<()>,
    thread: JoinHandle<()>,
}

impl Progress {
    /// Starts the printer if `enabled`; it reads `counters` until [`Progress::finish`].
    pub(crate) fn start(enabled: bool, counters: std::sync::Arc<Counters>) -> Option<Progress> {
        if !enabled {
            return None;
        }
        let (stop, stopped) = mpsc::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("leasehold-review-progress".into())
            .spawn(move || print_until(&stopped, &counters))
            .ok()?;
        Some(Progress { stop, thread })
    }

    pub(crate) fn finish(self) {
        let _ = self.stop.send(());
        let _ = self.thread.join();
    }
}

fn print_until(stopped: &mpsc::Receiver<()>, counters: &Counters) {
    let mut wait = QUIET_FOR;
    let mut width = 0;
    let stderr = std::io::stderr();
    // Until told to stop (or the sender is gone).
    while let Err(RecvTimeoutError::Timeout) = stopped.recv_timeout(wait) {
        wait = EVERY;
        let files = counters.files.load(Ordering::Relaxed);
        let lines = counters.lines.load(Ordering::Relaxed);
        let line = format!("reviewing: {files} files, {lines} lines");
        width = width.max(line.len());
        let mut e = stderr.lock();
        let _ = write!(e, "\r{line:<width$}");
        let _ = e.flush();
    }
    if width > 0 {
        let mut e = stderr.lock();
        let _ = write!(e, "\r{:width$}\r", "");
        let _ = e.flush();
    }
}
