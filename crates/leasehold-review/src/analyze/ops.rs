//! Client knowledge: which calls of which client libraries are lock operations. redis-py,
//! Jedis, Lettuce, Spring Data Redis, Redisson, go-redis, redigo, ioredis, node-redis,
//! redis-rs, fred, phpredis, Predis, Laravel and redis-rb name their commands after Redis's
//! (`set`, `setnx`, `SetNX`, `set_nx`, `setIfAbsent`, `del`, `Del`, `delete`, `unlink`,
//! `expire`, …), take SET's options as keywords, strings, option objects or builders, or
//! send raw commands (`Do("SET", …)`, `execute_command`, `redis::cmd("SET").arg(…)`); SQL
//! advisory locks are function calls inside string literals; Lua scripts likewise.

use std::collections::HashMap;

use super::ir::{CallId, Expr, FileIr, Kind};
use super::{lua, sql};
use crate::{Lang, Store};

/// What a lock operation does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum OpKind {
    /// SET NX, SETNX and friends.
    Acquire,
    /// DEL / UNLINK.
    Del,
    /// EXPIRE / PEXPIRE / EXPIREAT / PEXPIREAT.
    Expire,
    /// SET … XX.
    SetXx,
    /// GET.
    Get,
    /// WATCH.
    Watch,
    /// MULTI (or a transaction pipeline).
    Multi,
    /// A SQL lock function: the function's name.
    SqlLock(&'static str),
    /// A SQL unlock.
    SqlUnlock,
    /// `tryLock()`, `lock.acquire(blocking=False)`: a library lock's try.
    TryLock,
    /// A library's lock object made for a key (`r.lock(name)`, `Cache::lock`, `getLock`),
    /// taken by a context manager or by a later TryLock on it.
    LibLock,
    /// A library lock's release (`unlock()`, `release()`), owner-checked by the library.
    LibRelease,
}

/// One lock operation at one call.
#[derive(Debug, Clone)]
pub(crate) struct Op {
    pub kind: OpKind,
    pub call: CallId,
    pub store: Store,
    /// The client API as written, for the inventory and messages.
    pub api: String,
    pub key: Option<Expr>,
    pub value: Option<Expr>,
    /// For acquires: the expiry as written, or None.
    pub expiry: Option<String>,
}

const RAW: &[&str] = &[
    "do",
    "execute_command",
    "call",
    "sendcommand",
    "send_command",
    "rawcommand",
    "executeraw",
    "executecommand",
    "command",
    "docontext",
    "custom",
];

/// Words that, among SET's options, give the key an expiry.
const EXPIRY_WORDS: &[&str] = &[
    "ex",
    "px",
    "exat",
    "pxat",
    "expiration",
    "expire",
    "expires",
    "expiry",
    "expire_in",
    "expires_in",
    "ttl",
    "timeout",
    "timeunit",
    "duration",
    "seconds",
    "milliseconds",
    "setexpiry",
    "with_expiration",
    "time",
    "lock_timeout",
    "expiresin",
];

pub(crate) fn ops(lang: Lang, ir: &FileIr) -> Vec<Op> {
    let mut out = Vec::new();
    for (id, c) in ir.calls.iter().enumerate() {
        if c.name.is_empty() {
            continue;
        }
        let lname = normalize(&c.name);
        // Raw commands: Do("SET", k, v, "NX"), execute_command("DEL", k), cmd("SET").arg(…).
        let raw = if RAW.contains(&lname.as_str()) {
            c.args.first().and_then(|a| match &a.expr.kind {
                Kind::Str(s) if is_command(s) => {
                    Some((s.to_ascii_lowercase(), c.args[1..].to_vec()))
                }
                _ => None,
            })
        } else if lname == "cmd" {
            c.args.first().and_then(|a| match &a.expr.kind {
                Kind::Str(s) if is_command(s) => {
                    Some((s.to_ascii_lowercase(), builder_args(ir, id)))
                }
                _ => None,
            })
        } else {
            None
        };
        if let Some((cmd, args)) = raw {
            let words: Vec<String> =
                args.iter().skip(2).flat_map(|a| a.expr.words.iter().cloned()).collect();
            let key = args.first().map(|a| a.expr.clone());
            let value = args.get(1).map(|a| a.expr.clone());
            let kind = match cmd.as_str() {
                "set" if words.iter().any(|w| w == "nx") => Some(OpKind::Acquire),
                "set" if words.iter().any(|w| w == "xx") => Some(OpKind::SetXx),
                "setnx" => Some(OpKind::Acquire),
                "del" | "unlink" => Some(OpKind::Del),
                "expire" | "pexpire" | "expireat" | "pexpireat" => Some(OpKind::Expire),
                "get" => Some(OpKind::Get),
                "watch" => Some(OpKind::Watch),
                "multi" => Some(OpKind::Multi),
                _ => None,
            };
            if let Some(kind) = kind {
                let expiry =
                    if kind == OpKind::Acquire && cmd == "set" { expiry_in(&words) } else { None };
                let api = format!("{}(\"{}\")", c.name, cmd.to_ascii_uppercase());
                out.push(Op { kind, call: id, store: Store::Redis, api, key, value, expiry });
            }
            continue;
        }
        if let Some(op) = method_op(lang, ir, id, &lname) {
            out.push(op);
        }
    }
    out.extend(sql_ops(ir));
    out.extend(sequel_ops(ir));
    out
}

/// Sequel's `DB.get(Sequel.function(:pg_try_advisory_lock, id))`: the function by symbol,
/// run by the call that takes it.
fn sequel_ops(ir: &FileIr) -> Vec<Op> {
    let mut out = Vec::new();
    let mut users: Option<ArgUsers> = None;
    for (id, c) in ir.calls.iter().enumerate() {
        if c.name != "function" || c.receiver.as_ref().is_none_or(|r| r.text != "Sequel") {
            continue;
        }
        let Some(f) = c.args.first() else { continue };
        let q = sql::analyze(&format!("{}()", f.expr.text.trim_start_matches(':')));
        let runner = users.get_or_insert_with(|| arg_users(ir)).calls.get(&id).copied();
        if let (Some(q), Some(r)) = (q, runner) {
            push_sql(&mut out, r, &q);
        }
    }
    out
}

/// `set_nx` → `setnx`, `SetNX` → `setnx`, `setIfAbsent` → `setifabsent`.
pub(crate) fn normalize(name: &str) -> String {
    name.chars().filter(|c| !matches!(c, '_' | '!' | '?')).flat_map(char::to_lowercase).collect()
}

fn is_command(s: &str) -> bool {
    matches!(
        s.to_ascii_lowercase().as_str(),
        "set"
            | "setnx"
            | "del"
            | "unlink"
            | "expire"
            | "pexpire"
            | "expireat"
            | "pexpireat"
            | "get"
            | "watch"
            | "multi"
    )
}

/// The `.arg(x)` calls chained on a `cmd("…")`, in order.
fn builder_args(ir: &FileIr, root: CallId) -> Vec<super::ir::Arg> {
    let mut out = Vec::new();
    let mut cur = root;
    loop {
        let next = ir.caller_of.get(&cur).copied();
        match next {
            Some(n) if ir.calls[n].name == "arg" => {
                out.extend(ir.calls[n].args.iter().cloned());
                cur = n;
            }
            _ => return out,
        }
    }
}

/// The expiry option among SET's option words, as written.
fn expiry_in(words: &[String]) -> Option<String> {
    words.iter().find(|w| EXPIRY_WORDS.contains(&w.as_str())).cloned()
}

fn method_op(lang: Lang, ir: &FileIr, id: CallId, lname: &str) -> Option<Op> {
    let c = &ir.calls[id];
    // Go's clients take a context first.
    let shift = usize::from(
        lang == Lang::Go
            && c.args
                .first()
                .is_some_and(|a| a.expr.text == "ctx" || a.expr.text.contains("context.")),
    );
    let arg = |i: usize| c.args.get(i + shift).map(|a| a.expr.clone());
    let opt_words = |from: usize| -> Vec<String> {
        let mut w = Vec::new();
        for a in c.args.iter().skip(from + shift) {
            if let Some(n) = &a.name {
                w.push(n.to_ascii_lowercase());
            }
            w.extend(a.expr.words.iter().cloned());
            // An options value held in a variable: `set_options(k, v, opts)`.
            if let Kind::Name(n) = &a.expr.kind
                && let Some(v) = ir.value_of(c.func, n, false, a.expr.span.start_byte)
            {
                w.extend(v.words.iter().cloned());
            }
        }
        w
    };
    let mk = |kind: OpKind, key: Option<Expr>, value: Option<Expr>, expiry: Option<String>| Op {
        kind,
        call: id,
        store: Store::Redis,
        api: c.name.clone(),
        key,
        value,
        expiry,
    };
    let receiver_words = c.receiver.as_ref().map(|r| r.words.clone()).unwrap_or_default();
    match lname {
        "set" | "setargs" | "setoptions" | "set_options" => {
            if c.args.len() < shift + 2 {
                return None;
            }
            let w = opt_words(2);
            // `set(name, value, nx=nx)`: a wrapper passing its caller's flag on, not a lock.
            let passed_on = c.args.iter().any(|a| {
                a.name.as_deref().is_some_and(|n| n.eq_ignore_ascii_case("nx"))
                    && !matches!(a.expr.kind, Kind::Bool(true) | Kind::Num(_) | Kind::Str(_))
            });
            if passed_on {
                return None;
            }
            if w.iter().any(|x| x == "nx") {
                Some(mk(OpKind::Acquire, arg(0), arg(1), expiry_in(&w)))
            } else if w.iter().any(|x| x == "xx") {
                Some(mk(OpKind::SetXx, arg(0), arg(1), None))
            } else {
                None
            }
        }
        "setnx" => {
            if c.args.len() < shift + 2 {
                return None;
            }
            // go-redis's SetNX takes a TTL (0: none); others have no expiry argument.
            let expiry = match c.args.get(shift + 2) {
                Some(t) if lang == Lang::Go => {
                    let none = matches!(&t.expr.kind, Kind::Num(n) if n == "0")
                        || t.expr.text.contains("KeepTTL");
                    (!none).then(|| t.expr.text.clone())
                }
                _ => None,
            };
            Some(mk(OpKind::Acquire, arg(0), arg(1), expiry))
        }
        "setifabsent" => {
            if c.args.len() < 2 {
                return None;
            }
            let expiry = c.args.get(2).map(|a| a.expr.text.clone());
            Some(mk(OpKind::Acquire, arg(0), arg(1), expiry))
        }
        "del" | "delete" | "unlink" | "forget" => {
            // A map's, a file system's or an ORM's delete is not Redis's: the rules only
            // count it when the key is a lock's.
            if receiver_words
                .iter()
                .any(|w| matches!(w.as_str(), "os" | "fs" | "shutil" | "files" | "path"))
            {
                return None;
            }
            // Laravel's cache stores' `forget($key)` (`Cache::forget`, `$this->store->forget`);
            // another language's `forget` is not a delete.
            if lname == "forget" && lang != Lang::Php {
                return None;
            }
            // ZooKeeper's `delete(path, version)` removes a node this session created (a path
            // no successor shares), not a key another holder may own now.
            let second = c.args.get(shift + 1);
            // etcd's `delete(key, prevValue=owner)` is a compare-and-delete.
            let conditional = c.args.iter().any(|a| {
                a.name.as_deref().is_some_and(|n| {
                    let n = n.to_ascii_lowercase();
                    n.contains("prev") || n.contains("version") || n.contains("expected")
                })
            });
            let versioned = conditional
                || second.is_some_and(|a| {
                    a.name.as_deref() == Some("version")
                        || matches!(a.expr.kind, Kind::Null | Kind::Num(_))
                        || a.expr.text == "None"
                        || a.expr.text.to_ascii_lowercase().contains("version")
                });
            if versioned {
                return None;
            }
            let key = arg(0)?;
            Some(mk(OpKind::Del, Some(key), None, None))
        }
        // Spring's `setIfPresent(key, value, ttl)` is SET XX: it extends whoever holds the key.
        "setifpresent" if c.args.len() >= 2 => Some(mk(OpKind::SetXx, arg(0), arg(1), None)),
        "expire" | "pexpire" | "expireat" | "pexpireat" => {
            Some(mk(OpKind::Expire, arg(0), None, None))
        }
        "get" if c.args.len() == 1 + shift => Some(mk(OpKind::Get, arg(0), None, None)),
        "watch" => Some(mk(OpKind::Watch, arg(0), None, None)),
        "multi" | "txpipelined" | "transaction" | "exec" => {
            Some(mk(OpKind::Multi, None, None, None))
        }
        "lock" | "getlock" | "getfairlock" | "getspinlock" | "newmutex" | "getreadwritelock"
            if c.receiver.is_some()
                && c.args
                    .first()
                    .is_some_and(|a| !matches!(a.expr.kind, Kind::Num(_)) && a.name.is_none()) =>
        {
            Some(Op {
                kind: OpKind::LibLock,
                call: id,
                store: Store::Other,
                api: c.name.clone(),
                key: arg(0),
                value: None,
                expiry: c.args.get(1).map(|a| a.expr.text.clone()),
            })
        }
        "acquire" | "get" | "block" | "lock" if lib_lock_object(ir, c) => Some(Op {
            kind: OpKind::TryLock,
            call: id,
            store: Store::Other,
            api: format!("lock.{}", c.name),
            key: None,
            value: None,
            expiry: None,
        }),
        // Rust's `try_lock` is a `Mutex`'s, in this process.
        "trylock" if lang != Lang::Rust => Some(Op {
            kind: OpKind::TryLock,
            call: id,
            store: Store::Other,
            api: c.name.clone(),
            key: None,
            value: None,
            expiry: None,
        }),
        "acquire"
            if lang == Lang::Python && {
                let w = opt_words(0);
                w.iter().any(|x| x == "blocking" || x == "blocking_timeout" || x == "timeout")
            } =>
        {
            Some(Op {
                kind: OpKind::TryLock,
                call: id,
                store: Store::Redis,
                api: "lock.acquire".into(),
                key: None,
                value: None,
                expiry: None,
            })
        }
        "unlock" | "release" | "unlockasync" | "releaselock" => Some(Op {
            kind: OpKind::LibRelease,
            call: id,
            store: Store::Other,
            api: c.name.clone(),
            key: arg(0),
            value: None,
            expiry: None,
        }),
        _ => None,
    }
}

/// Whether a call's receiver names a library lock object: `$lock` from `Cache::lock(…)`,
/// `lock` from `r.lock(…)` or `redisson.getLock(…)`.
fn lib_lock_object(ir: &FileIr, c: &super::ir::Call) -> bool {
    let Some(r) = &c.receiver else { return false };
    let v = match &r.kind {
        Kind::Name(n) => ir.value_of(c.func, n, false, r.span.start_byte),
        Kind::Field(n) => ir.value_of(c.func, n, true, r.span.start_byte),
        Kind::Call(id) => {
            return is_lock_factory(&ir.calls[*id].name) && !ir.calls[*id].args.is_empty();
        }
        _ => None,
    };
    matches!(v.map(|v| &v.kind), Some(Kind::Call(id)) if is_lock_factory(&ir.calls[*id].name) && !ir.calls[*id].args.is_empty())
}

fn is_lock_factory(name: &str) -> bool {
    matches!(
        normalize(name).as_str(),
        "lock" | "getlock" | "getfairlock" | "getspinlock" | "newmutex" | "getreadwritelock"
    )
}

/// Which calls take what as an argument, for the few strings that need it: built once per
/// file rather than by a scan of every call for each SQL string.
struct ArgUsers {
    /// For a call, the first call that takes it as an argument.
    calls: HashMap<CallId, CallId>,
    /// For a name (or field), the calls that take it as an argument, in order.
    names: HashMap<String, Vec<CallId>>,
}

fn arg_users(ir: &FileIr) -> ArgUsers {
    let mut u = ArgUsers { calls: HashMap::new(), names: HashMap::new() };
    for (i, c) in ir.calls.iter().enumerate() {
        for a in &c.args {
            match &a.expr.kind {
                Kind::Call(id) => {
                    u.calls.entry(*id).or_insert(i);
                }
                Kind::Name(n) | Kind::Field(n) => {
                    let v = u.names.entry(n.clone()).or_default();
                    if v.last() != Some(&i) {
                        v.push(i);
                    }
                }
                _ => {}
            }
        }
    }
    u
}

/// SQL lock functions in string literals (or constants) passed to a call.
fn sql_ops(ir: &FileIr) -> Vec<Op> {
    let mut out = Vec::new();
    let mut users: Option<ArgUsers> = None;
    for s in &ir.strings {
        let Some(q) = sql::analyze(&s.text) else { continue };
        let users = users.get_or_insert_with(|| arg_users(ir));
        let call = match (s.call, &s.assigned_to) {
            // `conn.execute(text("SELECT …"))`: the call that runs what the builder made.
            (Some(c), _)
                if matches!(
                    normalize(&ir.calls[c].name).as_str(),
                    "text" | "raw" | "literal" | "sqltext" | "rawsql" | "sql"
                ) && users.calls.contains_key(&c) =>
            {
                users.calls.get(&c).copied()
            }
            (Some(c), _) => Some(c),
            // A query held in a constant: the calls that pass it.
            (None, Some(name)) => {
                let users: &[CallId] = users.names.get(name).map_or(&[], |v| v.as_slice());
                for u in users.iter().skip(1) {
                    push_sql(&mut out, *u, &q);
                }
                users.first().copied()
            }
            _ => None,
        };
        if let Some(c) = call {
            push_sql(&mut out, c, &q);
        }
    }
    out
}

fn push_sql(out: &mut Vec<Op>, call: CallId, q: &sql::Sql) {
    if let Some(f) = q.lock {
        let store = if f == "get_lock" { Store::Mysql } else { Store::Postgres };
        out.push(Op {
            kind: OpKind::SqlLock(f),
            call,
            store,
            api: f.to_owned(),
            key: None,
            value: None,
            expiry: None,
        });
    }
    if q.unlock {
        out.push(Op {
            kind: OpKind::SqlUnlock,
            call,
            store: Store::Postgres,
            api: "unlock".into(),
            key: None,
            value: None,
            expiry: None,
        });
    }
}

/// Scripts in string literals: (string index, analysis).
pub(crate) fn scripts(ir: &FileIr) -> Vec<(usize, lua::Script)> {
    ir.strings
        .iter()
        .enumerate()
        .filter(|(_, s)| lua::looks_like_script(&s.text))
        .filter_map(|(i, s)| lua::analyze(&s.text).map(|a| (i, a)))
        .collect()
}
