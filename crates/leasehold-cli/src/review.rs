//! `leasehold review`: the static checker for distributed-lock bugs in other people's code
//! (the `leasehold-review` library), with linters' exit codes: 0 clean, 1 an error-level
//! finding, 2 a usage error. Built only with the `review` feature; without it the command
//! exits 64 and names the feature.

use std::path::PathBuf;

use clap::Args;

/// Exit codes of `review`, for its long help.
pub(crate) const EXIT_CODES: &str = "\
Exit codes (a linter's, not the sysexits codes of the other commands):
  0   no error-level finding (warnings and notes do not count)
  1   at least one error-level finding
  2   usage error: an unknown rule id, a path that does not exist, a bad option or
      --format, an --output file that cannot be written
  64  this leasehold was built without the `review` feature

Suppress a finding with a comment on its line, or alone on the line above it:
  r.delete(key)  # leasehold: ignore[release-without-owner-check] the janitor owns this key
The reason is required; a suppression without one, or naming an unknown rule, suppresses
nothing and is reported as a note.";

/// What `review` prints.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Format {
    /// rustc-style findings with the source underlined, notes and a summary.
    Text,
    /// The whole report as JSON (`version`, findings, inventory, notes, stats).
    Json,
    /// SARIF 2.1.0, for GitHub code scanning and other SARIF viewers.
    Sarif,
}

#[derive(Args, Debug)]
#[cfg_attr(not(feature = "review"), allow(dead_code))]
pub(crate) struct ReviewArgs {
    /// Files and directories to review [default: .]. Directories are walked as ripgrep
    /// walks them (.gitignore, hidden files, and vendor, node_modules, third_party,
    /// site-packages, venv, dist, build and target directories skipped); a file named here is
    /// always read.
    #[arg(value_name = "PATH")]
    pub paths: Vec<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value = "text", value_name = "text|json|sarif")]
    pub format: Format,
    /// Print the lock inventory (every lock site: store, api, key, expiry, owner, release,
    /// renew, fence, findings) instead of the findings; with --format json, as JSON.
    #[arg(long)]
    pub inventory: bool,
    /// Check only these rules (comma-separated ids; `--explain` lists them).
    #[arg(long, value_name = "RULE,…", value_delimiter = ',')]
    pub select: Vec<String>,
    /// Never check these rules (comma-separated ids).
    #[arg(long, value_name = "RULE,…", value_delimiter = ',')]
    pub ignore: Vec<String>,
    /// Print the page of RULE (what it detects, why it breaks, bad and fixed code, leasehold's
    /// way) and exit.
    #[arg(long, value_name = "RULE")]
    pub explain: Option<String>,
    /// Files larger than this are passed over with a note: bytes, or with K, M or G
    /// (powers of 1024: 512K, 2M).
    #[arg(long, default_value = "2M", value_parser = parse_bytes, value_name = "BYTES")]
    pub max_file_size: u64,
    /// Worker threads (0: one per core).
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub threads: usize,
    /// Write the report to FILE instead of stdout (e.g. SARIF for upload); the summary
    /// goes to stderr.
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// No progress line on stderr (it is shown only when stderr is a terminal, and only once
    /// a review takes more than a second).
    #[arg(long)]
    pub no_progress: bool,
}

/// `2M`, `512K`, `1G`, `4096`; K, M and G are powers of 1024 (a trailing `B` or `iB` is
/// allowed).
fn parse_bytes(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let t = t.strip_suffix("iB").or_else(|| t.strip_suffix('B')).unwrap_or(t);
    let (digits, unit) = match t.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => (&t[..i], c.to_ascii_uppercase()),
        _ => (t, ' '),
    };
    let shift = match unit {
        ' ' => 0,
        'K' => 10,
        'M' => 20,
        'G' => 30,
        _ => return Err(format!("{s:?}: a size is bytes, or a number with K, M or G")),
    };
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("{s:?}: a size is bytes, or a number with K, M or G"))?;
    match n.checked_mul(1 << shift) {
        Some(0) => Err("the size must be positive".into()),
        Some(b) => Ok(b),
        None => Err(format!("{s:?} is too large")),
    }
}

/// The rules, for the long help.
pub(crate) fn about() -> String {
    let intro = "Find distributed-lock bugs in Python, Java, Go, JavaScript, TypeScript, Rust, \
PHP and Ruby code: SETNX then EXPIRE, a bare DEL as release, an unchecked \
pg_try_advisory_lock, a constant lock value, a session lock through a pool, … Each file is \
parsed with tree-sitter; nothing is run and nothing is sent anywhere.";
    format!("{intro}\n\nRules (--explain RULE for the page):\n{}", rules())
}

#[cfg(feature = "review")]
fn rules() -> String {
    use leasehold_review::Rule;
    let width = Rule::ALL.iter().map(|r| r.id().len()).max().unwrap_or(0);
    Rule::ALL
        .iter()
        .map(|r| format!("  {:<width$}  {:<7}  {}", r.id(), r.severity().to_string(), r.summary()))
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(not(feature = "review"))]
fn rules() -> String {
    "  (this leasehold was built without the `review` feature)".into()
}

/// Runs `review`; the exit code.
#[cfg(not(feature = "review"))]
pub(crate) fn main(_args: ReviewArgs) -> u8 {
    eprintln!(
        "leasehold: review is not in this build: enable the cargo feature \"review\" (cargo \
         install leasehold-cli --features review)"
    );
    crate::exit::code::USAGE
}

#[cfg(feature = "review")]
pub(crate) use run::main;

#[cfg(feature = "review")]
mod run {
    use std::io::{IsTerminal, Write};
    use std::path::PathBuf;

    use leasehold_review::{Options, Report, Rule, Severity, render};

    use super::{Format, ReviewArgs};

    /// A usage error: one line on stderr, exit 2.
    const USAGE: u8 = 2;

    fn usage(msg: impl std::fmt::Display) -> u8 {
        eprintln!("leasehold: review: {msg}");
        USAGE
    }

    fn rules(ids: &[String], flag: &str) -> Result<Vec<Rule>, u8> {
        ids.iter()
            .map(|id| id.trim().parse::<Rule>().map_err(|e| usage(format_args!("{flag}: {e}"))))
            .collect()
    }

    /// Runs `review`; the exit code.
    pub(crate) fn main(args: ReviewArgs) -> u8 {
        match run(args) {
            Ok(code) | Err(code) => code,
        }
    }

    fn run(args: ReviewArgs) -> Result<u8, u8> {
        if let Some(id) = &args.explain {
            let rule =
                id.trim().parse::<Rule>().map_err(|e| usage(format_args!("--explain: {e}")))?;
            write_stdout(render::explain(rule));
            return Ok(0);
        }
        let select = rules(&args.select, "--select")?;
        let ignore = rules(&args.ignore, "--ignore")?;
        if args.inventory && args.format == Format::Sarif {
            return Err(usage("--inventory prints text or JSON, not SARIF"));
        }
        let paths = if args.paths.is_empty() { vec![PathBuf::from(".")] } else { args.paths };
        for p in &paths {
            match p.try_exists() {
                Ok(true) => {}
                Ok(false) => {
                    return Err(usage(format_args!("{}: no such file or directory", p.display())));
                }
                Err(e) => return Err(usage(format_args!("{}: {e}", p.display()))),
            }
        }
        let opts = Options {
            select,
            ignore,
            max_file_bytes: args.max_file_size,
            threads: args.threads,
            progress: !args.no_progress && std::io::stderr().is_terminal(),
        };
        let report = leasehold_review::review(&paths, &opts);
        let color = args.output.is_none()
            && std::io::stdout().is_terminal()
            && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
        let out = match (args.inventory, args.format) {
            (true, Format::Json) => render::inventory_json(&report),
            (true, _) => render::inventory_text(&report),
            (false, Format::Text) => render::text(&report, &render::read_source, color),
            (false, Format::Json) => render::json(&report),
            (false, Format::Sarif) => render::sarif(&report),
        };
        match &args.output {
            Some(file) => {
                std::fs::write(file, out)
                    .map_err(|e| usage(format_args!("cannot write {}: {e}", file.display())))?;
                eprintln!("leasehold: review: {}; report in {}", summary(&report), file.display());
            }
            None => write_stdout(&out),
        }
        Ok(u8::from(report.has_errors()))
    }

    /// `N errors, M warnings in K files`.
    fn summary(r: &Report) -> String {
        let errors = r.findings.iter().filter(|f| f.severity == Severity::Error).count();
        let plural =
            |n: usize, w: &str| if n == 1 { format!("1 {w}") } else { format!("{n} {w}s") };
        format!(
            "{}, {} in {}",
            plural(errors, "error"),
            plural(r.findings.len() - errors, "warning"),
            plural(r.stats.files, "file")
        )
    }

    /// Writes to stdout; a closed pipe (`| head`) is not an error worth a panic.
    fn write_stdout(s: &str) {
        let mut out = std::io::stdout().lock();
        let _ = out.write_all(s.as_bytes()).and_then(|()| out.flush());
    }
}

#[cfg(test)]
mod tests {
    use super::parse_bytes;

    #[test]
    fn sizes() {
        assert_eq!(parse_bytes("2M"), Ok(2 << 20));
        assert_eq!(parse_bytes("512K"), Ok(512 << 10));
        assert_eq!(parse_bytes("512k"), Ok(512 << 10));
        assert_eq!(parse_bytes("1G"), Ok(1 << 30));
        assert_eq!(parse_bytes("2MiB"), Ok(2 << 20));
        assert_eq!(parse_bytes("2MB"), Ok(2 << 20));
        assert_eq!(parse_bytes("4096"), Ok(4096));
        assert_eq!(parse_bytes("100B"), Ok(100));
        for bad in ["", "M", "2X", "-1", "0", "1.5M", "99999999999G"] {
            assert!(parse_bytes(bad).is_err(), "{bad:?}");
        }
    }
}
