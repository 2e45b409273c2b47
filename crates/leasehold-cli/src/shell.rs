//! `leasehold completions SHELL` and `leasehold man`: generated from the clap definitions, so
//! they never drift from the commands; internal commands are left out of both.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::CommandFactory;

use crate::Cli;

/// The command tree as users see it: without the hidden (internal) commands.
fn public(help_command: bool) -> clap::Command {
    let full = Cli::command();
    let subs: Vec<clap::Command> =
        full.get_subcommands().filter(|s| !s.is_hide_set()).cloned().collect();
    // clap cannot remove a subcommand; rebuild the top level with the public ones.
    let mut cmd = clap::Command::new("leasehold")
        .version(env!("CARGO_PKG_VERSION"))
        .about(full.get_about().cloned().unwrap_or_default())
        .after_help(full.get_after_help().cloned().unwrap_or_default())
        .subcommand_required(true)
        .disable_help_subcommand(!help_command)
        .subcommands(subs);
    cmd.build();
    cmd
}

/// Prints the completion script for `shell`.
pub fn completions(shell: clap_complete::Shell) -> ExitCode {
    let mut cmd = public(true);
    clap_complete::generate(shell, &mut cmd, "leasehold", &mut std::io::stdout());
    ExitCode::SUCCESS
}

const ENVIRONMENT: &str = r#".SH ENVIRONMENT
.TP
\fBLEASEHOLD_STORE\fR
The store URL when \fB\-\-store\fR and \fB\-\-store\-file\fR are not given.
.TP
\fBLEASEHOLD_STORE_FILE\fR
A file whose first line is the store URL (keep it mode 0600): keeps a password out of
\fBps\fR(1) and shell history.
.TP
\fBXDG_STATE_HOME\fR, \fBHOME\fR
The default store is sqlite://$XDG_STATE_HOME/leasehold/leasehold.db
(~/.local/state/leasehold/leasehold.db): one per user. For one store per machine set
LEASEHOLD_STORE=sqlite:///var/lib/leasehold/leasehold.db, a directory every user of it can
write (mode 1777, or a shared group with g+ws), since SQLite creates \-wal and \-shm files
beside the database.
.TP
\fBLEASEHOLD_KEY\fR, \fBLEASEHOLD_FENCE\fR, \fBLEASEHOLD_OWNER\fR, \fBLEASEHOLD_STORE_ID\fR
Set by \fBleasehold run\fR for its command: the key, the grant's fence, its owner token and
the store (password redacted). A nested \fBleasehold run\fR of the same key on the same store
runs under that grant. For a \fB\-\-permits\fR run the key is the slot's, \fIKEY\fR#\fISLOT\fR,
with that slot's fence.
.TP
\fBLEASEHOLD_SLOT\fR, \fBLEASEHOLD_PERMITS\fR
Set by \fBleasehold run \-\-permits\fR \fIN\fR: the slot held (0 to \fIN\fR\-1) and \fIN\fR.
.TP
\fBLEASEHOLD_MODE\fR
\fBshared\fR for \fBleasehold run \-\-shared\fR (a reader), else \fBexclusive\fR.
.TP
\fBLEASEHOLD_KEYS\fR, \fBLEASEHOLD_KEY_\fR\fII\fR, \fBLEASEHOLD_FENCE_\fR\fII\fR, \fBLEASEHOLD_OWNER_\fR\fII\fR
Set by \fBleasehold run\fR \fIKEY1 KEY2\fR ... (several keys, all held): the number of keys,
then for each \fII\fR from 0, in sorted key order, its key, fence and owner token
(\fBLEASEHOLD_KEY\fR and the others without a suffix are not set).
"#;

const SIGNALS: &str = r#".SH SIGNALS
.TP
\fBSIGINT\fR, \fBSIGTERM\fR, \fBSIGHUP\fR
\fBleasehold run\fR passes them to the command's process group and goes on holding the key
until the command ends.
.TP
Lease lost
At the local deadline (no renewal confirmed) the command's processes get SIGTERM, then SIGKILL
after \fB\-\-grace\fR, which is fitted so that the SIGKILL lands before the store may grant
the key to anyone else. When the store says the key is no longer ours, or the session ended,
SIGKILL at once.
.TP
\fBleasehold run\fR killed
Its supervisor SIGKILLs the command and every process it started (on Linux also those that
left its process group) as soon as \fBrun\fR is gone, whatever killed it.
"#;

const EXIT_STATUS: &str = r#".SH EXIT STATUS
0 success (for \fBrun\fR: the command's own code, 128+N if it died of signal N);
64 invalid usage or input (also: a store that cannot hold \fB\-\-permits\fR or
\fB\-\-shared\fR, another permit count than the one held); 69 store unavailable or an outcome unknown (never once \fBrun\fR's
command has started); 70 internal error (\fBrun\fR: its supervisor died); 75 busy (\fBrun \-E N\fR: N); 77 not the owner; 78 the store refused
the configuration (authentication, TLS, a missing database); 79 the lease was lost while the
command ran; 126/127 the command could not be executed / was not found.
"#;

/// `review` touches no store and runs nothing: its own environment and a linter's exit codes.
const REVIEW_SECTIONS: &str = r#".SH ENVIRONMENT
.TP
\fBNO_COLOR\fR
When set to a non-empty value, the text report has no colours (it has none either when
stdout is not a terminal, or with \fB\-o\fR).
.SH EXIT STATUS
0 no error-level finding (warnings and notes do not count); 1 at least one error-level
finding; 2 usage error (an unknown rule id, a path that does not exist, a bad option or
\fB\-\-format\fR, an \fB\-\-output\fR file that cannot be written); 64 this leasehold was
built without the \fBreview\fR feature.
"#;

/// One page: the command's own sections, then environment, signals and exit status.
fn page(cmd: clap::Command, out: &mut Vec<u8>) -> std::io::Result<()> {
    let review = cmd.get_name() == "review";
    let has_subcommands = cmd.has_subcommands();
    let has_version = cmd.get_version().is_some();
    let has_after = cmd.get_after_help().is_some() || cmd.get_after_long_help().is_some();
    let man = clap_mangen::Man::new(cmd);
    man.render_title(out)?;
    man.render_name_section(out)?;
    man.render_synopsis_section(out)?;
    man.render_description_section(out)?;
    man.render_options_section(out)?;
    if has_subcommands {
        man.render_subcommands_section(out)?;
    }
    if has_after {
        man.render_extra_section(out)?;
    }
    if review {
        out.extend_from_slice(REVIEW_SECTIONS.as_bytes());
    } else {
        out.extend_from_slice(ENVIRONMENT.as_bytes());
        out.extend_from_slice(SIGNALS.as_bytes());
        out.extend_from_slice(EXIT_STATUS.as_bytes());
    }
    if has_version {
        man.render_version_section(out)?;
    }
    Ok(())
}

/// Prints the page of `command` (default: the top level), or writes every page to `dir`.
pub fn man(dir: Option<PathBuf>, command: Option<String>) -> ExitCode {
    // `leasehold help` needs no page of its own.
    let top = public(false);
    let fail = |what: String| {
        eprintln!("leasehold: {what}");
        ExitCode::from(crate::exit::code::SOFTWARE)
    };
    if let Some(dir) = dir {
        if let Err(e) = std::fs::create_dir_all(&dir) {
            return fail(format!("cannot create {}: {e}", dir.display()));
        }
        let mut pages = vec![("leasehold.1".to_owned(), top.clone())];
        for sub in top.get_subcommands() {
            pages.push((format!("leasehold-{}.1", sub.get_name()), sub.clone()));
        }
        for (name, cmd) in pages {
            let mut out = Vec::new();
            let path = dir.join(&name);
            if let Err(e) = page(cmd, &mut out).and_then(|()| std::fs::write(&path, out)) {
                return fail(format!("cannot write {}: {e}", path.display()));
            }
            println!("{}", path.display());
        }
        return ExitCode::SUCCESS;
    }
    let cmd = match command {
        None => top,
        Some(name) => match top.find_subcommand(&name) {
            Some(c) => c.clone(),
            None => {
                eprintln!("leasehold: no command {name:?} (see 'leasehold --help')");
                return ExitCode::from(crate::exit::code::USAGE);
            }
        },
    };
    let mut out = Vec::new();
    if page(cmd, &mut out).is_err() || std::io::stdout().write_all(&out).is_err() {
        return ExitCode::from(crate::exit::code::SOFTWARE);
    }
    ExitCode::SUCCESS
}
