//! A history of critical sections recorded by several processes, and its checker; the
//! chaos trials' checker is [`chaos`].
//!
//! Each process appends `enter <t> <fence>` right after its acquire returns and
//! `exit <t> <fence>` right before it sends the release, `t` being `CLOCK_MONOTONIC`
//! nanoseconds (one clock for every process of the machine). A correct lock makes the
//! intervals disjoint and their fences increase in time order.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::Path;

pub mod chaos;

/// Nanoseconds on `CLOCK_MONOTONIC`.
pub fn monotonic_ns() -> i64 {
    let ts =
        nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC).expect("CLOCK_MONOTONIC");
    ts.tv_sec() * 1_000_000_000 + ts.tv_nsec()
}

/// Appends events for one process.
pub struct Recorder {
    file: File,
}

impl Recorder {
    /// Creates (or appends to) `path`.
    pub fn create(path: &Path) -> std::io::Result<Self> {
        Ok(Recorder { file: OpenOptions::new().create(true).append(true).open(path)? })
    }

    /// Records entering the critical section with `fence`.
    pub fn enter(&mut self, fence: u64) -> std::io::Result<()> {
        writeln!(self.file, "enter {} {fence}", monotonic_ns())
    }

    /// Records leaving it.
    pub fn exit(&mut self, fence: u64) -> std::io::Result<()> {
        writeln!(self.file, "exit {} {fence}", monotonic_ns())
    }
}

/// One critical section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Interval {
    /// Which history file it came from.
    pub who: String,
    /// Entry time, ns.
    pub enter: i64,
    /// Exit time, ns.
    pub exit: i64,
    /// The fence held.
    pub fence: u64,
}

/// What the checker found.
#[derive(Debug, Default)]
pub struct Report {
    /// Critical sections seen.
    pub intervals: usize,
    /// Pairs of critical sections that overlapped in time.
    pub overlaps: Vec<(Interval, Interval)>,
    /// Consecutive critical sections whose fences did not increase.
    pub fence_inversions: Vec<(Interval, Interval)>,
    /// Malformed lines or unmatched enter/exit events.
    pub malformed: Vec<String>,
}

impl Report {
    /// True when nothing is wrong.
    pub fn ok(&self) -> bool {
        self.overlaps.is_empty() && self.fence_inversions.is_empty() && self.malformed.is_empty()
    }
}

/// Parses one history file into intervals.
pub fn parse(who: &str, text: &str, report: &mut Report) -> Vec<Interval> {
    let mut out = Vec::new();
    let mut open: Option<(i64, u64)> = None;
    for line in text.lines() {
        let f: Vec<&str> = line.split(' ').collect();
        let parsed = match f.as_slice() {
            [kind, t, fence] => {
                t.parse::<i64>().ok().zip(fence.parse::<u64>().ok()).map(|p| (*kind, p))
            }
            _ => None,
        };
        match (parsed, open) {
            (Some(("enter", p)), None) => open = Some(p),
            (Some(("exit", (t, fence))), Some((enter, f0))) if fence == f0 && t >= enter => {
                out.push(Interval { who: who.to_owned(), enter, exit: t, fence });
                open = None;
            }
            _ => report.malformed.push(format!("{who}: {line:?}")),
        }
    }
    out
}

/// Checks intervals from all processes: disjoint in time, fences increasing in time order.
pub fn check(mut intervals: Vec<Interval>, mut report: Report) -> Report {
    intervals.sort_by_key(|i| i.enter);
    report.intervals = intervals.len();
    for w in intervals.windows(2) {
        if w[1].enter < w[0].exit {
            report.overlaps.push((w[0].clone(), w[1].clone()));
        }
        if w[1].fence <= w[0].fence {
            report.fence_inversions.push((w[0].clone(), w[1].clone()));
        }
    }
    report
}

/// Reads every `*.hist` file in `dir` and checks them together.
pub fn check_dir(dir: &Path) -> std::io::Result<Report> {
    let mut report = Report::default();
    let mut all = Vec::new();
    for e in std::fs::read_dir(dir)? {
        let p = e?.path();
        if p.extension().is_some_and(|x| x == "hist") {
            let text = std::fs::read_to_string(&p)?;
            let who = p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            all.extend(parse(&who, &text, &mut report));
        }
    }
    Ok(check(all, report))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(files: &[(&str, &str)]) -> Report {
        let mut r = Report::default();
        let mut all = Vec::new();
        for (who, text) in files {
            all.extend(parse(who, text, &mut r));
        }
        check(all, r)
    }

    #[test]
    fn clean_history_passes() {
        let r = run(&[
            ("a", "enter 10 1\nexit 20 1\nenter 50 3\nexit 60 3\n"),
            ("b", "enter 30 2\nexit 40 2\n"),
        ]);
        assert!(r.ok(), "{r:?}");
        assert_eq!(r.intervals, 3);
    }

    #[test]
    fn detects_overlap_and_fence_inversion() {
        let r = run(&[("a", "enter 10 2\nexit 40 2\n"), ("b", "enter 30 1\nexit 50 1\n")]);
        assert_eq!(r.overlaps.len(), 1);
        assert_eq!(r.fence_inversions.len(), 1);
        assert!(!r.ok());
    }

    #[test]
    fn detects_malformed() {
        let r = run(&[("a", "enter 10 1\nenter 20 2\nexit 30 2\n")]);
        assert!(!r.ok());
    }
}
