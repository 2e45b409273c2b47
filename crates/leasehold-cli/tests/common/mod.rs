//! What the CLI test binaries share: the binary, a private environment, output helpers.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_leasehold");

pub struct Env {
    pub dir: tempfile::TempDir,
}

impl Env {
    pub fn new() -> Self {
        Env { dir: tempfile::tempdir().unwrap() }
    }
    pub fn store(&self) -> String {
        format!("sqlite://{}/s.db", self.dir.path().display())
    }
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
    pub fn cmd(&self) -> Command {
        let mut c = Command::new(BIN);
        c.env_remove("LEASEHOLD_STORE")
            .env("XDG_STATE_HOME", self.dir.path().join("state"))
            .env("LH", BIN)
            .env("STORE", self.store())
            .current_dir(self.dir.path());
        c
    }
    /// `leasehold ARGS…`, with `--store` inserted after the subcommand.
    pub fn run(&self, args: &[&str]) -> Output {
        self.cmd().args(with_store(args, &self.store())).output().unwrap()
    }
    /// `leasehold ARGS…` with the store in `$LEASEHOLD_STORE`, never on the command line (a
    /// password there would show in `ps`).
    pub fn lh(&self, args: &[&str]) -> Command {
        let mut c = self.cmd();
        c.env("LEASEHOLD_STORE", self.store()).args(args);
        c
    }
    /// [`Env::lh`], run to its end.
    pub fn lh_out(&self, args: &[&str]) -> Output {
        self.lh(args).output().unwrap()
    }
    /// [`Env::lh`], started with stdout and stderr piped.
    pub fn lh_spawn(&self, args: &[&str]) -> Child {
        self.lh(args).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap()
    }
    pub fn spawn(&self, args: &[&str]) -> Child {
        self.cmd()
            .args(with_store(args, &self.store()))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    }
}

pub fn with_store(args: &[&str], store: &str) -> Vec<String> {
    let mut v: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    v.insert(1, format!("--store={store}"));
    v
}

pub fn code(o: &Output) -> i32 {
    o.status.code().unwrap_or(-1)
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

pub fn wait_for(path: &Path) {
    let start = Instant::now();
    while !path.exists() {
        assert!(start.elapsed() < Duration::from_secs(30), "{} never appeared", path.display());
        std::thread::sleep(Duration::from_millis(10));
    }
}

pub fn wait_child(mut c: Child, limit: Duration) -> Output {
    let start = Instant::now();
    loop {
        if c.try_wait().unwrap().is_some() {
            return c.wait_with_output().unwrap();
        }
        if start.elapsed() > limit {
            let _ = c.kill();
            panic!("leasehold did not exit within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

pub fn field(text: &str, name: &str) -> String {
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}=")))
        .unwrap_or_else(|| panic!("no {name}= in {text:?}"))
        .to_string()
}
