//! How a lock's owner value is made, and whether it tells holders apart: a literal, a host
//! name or a pid (through conversions, locals, constants and fields) does not. And whether that
//! matters: only where something acts on the key as its holder after the acquire.

use std::collections::{BTreeSet, HashSet};

use super::ir::{CallId, Expr, FileIr, FuncId, Kind};
use super::keys::norm;
use super::lua::Script;
use super::ops::{Op, OpKind, normalize};

/// What in a file acts on a lock's key as its holder, so that the value written at the acquire
/// must tell holders apart: a DEL or UNLINK (the release), an EXPIRE, PEXPIRE or SET XX after
/// the acquire's own (a renewal), a GET (its value read, to be compared), a call of a helper
/// that deletes or extends the key it is given, or a script that compares ARGV with the key's
/// value before it deletes or extends it. A key set NX with a constant value and never
/// released, renewed or read (a once-a-minute throttle: `SET cleanup 1 NX EX 60`) lets its
/// expiry alone end it; every holder may write the same value, as nobody asks who holds it.
pub(super) struct HolderActs {
    /// Normalised keys deleted, renewed or read.
    keys: HashSet<String>,
    /// An owner-checked release or renewal script is in the file. Scripts take their keys as
    /// `KEYS[n]`, given where they are called, so they are not tied to one key.
    checked_script: bool,
}

impl HolderActs {
    /// `absorbed` are the EXPIREs that give an acquire its expiry (SETNX then EXPIRE): part of
    /// the acquire, not a renewal. `helper_keys` are the keys passed to helpers that delete or
    /// extend the key they are given.
    pub(super) fn new(
        ops: &[Op],
        scripts: &[(usize, Script)],
        absorbed: &BTreeSet<CallId>,
        helper_keys: impl IntoIterator<Item = String>,
    ) -> HolderActs {
        let mut keys: HashSet<String> = helper_keys.into_iter().collect();
        for o in ops {
            let acts = match o.kind {
                OpKind::Del | OpKind::SetXx | OpKind::Get => true,
                OpKind::Expire => !absorbed.contains(&o.call),
                _ => false,
            };
            if acts && let Some(k) = &o.key {
                keys.insert(norm(k));
            }
        }
        let checked_script = scripts.iter().any(|(_, s)| s.checked_del || s.checked_renew);
        HolderActs { keys, checked_script }
    }

    /// Whether an acquire of `key` is followed by something that acts on it as its holder.
    pub(super) fn on(&self, key: Option<&Expr>) -> bool {
        self.checked_script || key.is_some_and(|k| self.keys.contains(&norm(k)))
    }
}

const HOST_PID_CALLS: &[&str] = &[
    "gethostname",
    "hostname",
    "getpid",
    "getmypid",
    "pid",
    "getlocalhost",
    "gethostaddress",
    "getcanonicalhostname",
    "uname",
    "node",
];

/// Whether the value never identifies one holder: a literal, a host name, a pid.
pub(super) fn constant(ir: &FileIr, func: FuncId, v: &Expr, depth: usize) -> Option<String> {
    match &v.kind {
        Kind::Str(s) => {
            Some(format!("the constant \"{}\"", s.chars().take(24).collect::<String>()))
        }
        Kind::Num(n) => Some(format!("the constant {n}")),
        Kind::Bool(b) => Some(format!("the constant {b}")),
        Kind::Name(n) | Kind::Field(n) if depth < 3 => {
            let field = matches!(v.kind, Kind::Field(_));
            let val = ir.value_of(func, n, field, v.span.start_byte)?;
            constant(ir, func, val, depth + 1)
        }
        Kind::Call(id) if depth < 4 => {
            let c = &ir.calls[*id];
            let n = normalize(&c.name);
            if let Some(what) = host_or_pid(&n, &v.text) {
                return Some(what.to_owned());
            }
            // Conversions keep what they convert: `str(os.getpid())`, `String.valueOf(pid)`,
            // `process::id().to_string()`, `strconv.Itoa(os.Getpid())`.
            let conv = matches!(
                n.as_str(),
                "str"
                    | "string"
                    | "tostring"
                    | "tos"
                    | "itoa"
                    | "formatint"
                    | "valueof"
                    | "strval"
                    | "repr"
                    | "sprint"
                    | "into"
                    | "toowned"
            );
            match (conv, c.args.as_slice(), &c.receiver) {
                (true, [one], _) => constant(ir, func, &one.expr, depth + 1),
                (true, [], Some(r)) => constant(ir, func, r, depth + 1),
                _ => None,
            }
        }
        Kind::Template(_) | Kind::Other => {
            // Interpolations of only host names and pids: `f"{socket.gethostname()}:{os.getpid()}"`.
            let lower = v.text.to_ascii_lowercase();
            let host_pid = HOST_PID_CALLS.iter().any(|h| lower.contains(h))
                || lower.contains("process.pid")
                || lower.contains("$$");
            if !host_pid {
                return None;
            }
            let unique = [
                "uuid", "random", "rand", "token", "secret", "nanoid", "ulid", "thread", "time",
                "now", "nano", "counter", "owner", "id()", "guid", "objectid", "urandom",
            ];
            if unique.iter().any(|u| lower.replace("getpid", "").replace("pid", "").contains(u)) {
                return None;
            }
            // Every interpolated piece must be a host/pid read or a literal.
            Some("made only of the host name and/or the pid".to_owned())
        }
        _ => None,
    }
}

fn host_or_pid(name: &str, text: &str) -> Option<&'static str> {
    let t = text.to_ascii_lowercase();
    if name.contains("hostname") || name == "getlocalhost" || name == "uname" {
        return Some("the host name");
    }
    if name.contains("getpid")
        || name == "getmypid"
        || (name == "pid" && (t.contains("process") || t.contains("os.")))
    {
        return Some("the process id");
    }
    if name == "id" && t.contains("process::id") {
        return Some("the process id");
    }
    None
}
