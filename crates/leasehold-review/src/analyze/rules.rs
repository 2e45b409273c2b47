//! The rules, over one file's lock operations. Each finding is tied to the call, script or
//! handler it is about; the inventory is built from the same facts.

use std::collections::{BTreeSet, HashMap};
use std::path::Path;

use super::advice::advice;
use super::ir::{CallId, Expr, FileIr, FuncId, Kind, Outcome, Use};
use super::keys::{lockish, names_lock, norm};
use super::lua::Script;
use super::ops::{Op, OpKind, normalize};
use super::sql;
use crate::{Checked, Finding, Lang, LockSite, Rule, Span, Store};

pub(crate) struct Ctx<'a> {
    pub facts: std::cell::OnceCell<Facts>,
    pub path: &'a Path,
    pub src: &'a str,
    pub lang: Lang,
    pub ir: &'a FileIr,
    pub ops: &'a [Op],
    pub scripts: &'a [(usize, Script)],
}

pub(crate) struct Out {
    pub findings: Vec<Finding>,
    pub inventory: Vec<LockSite>,
}

const FENCE_WORDS: &[&str] =
    &["fence", "fencing", "generation", "epoch", "idempoten", "version", "revision"];
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

impl Ctx<'_> {
    fn facts(&self) -> &Facts {
        self.facts.get_or_init(|| facts(self.ir))
    }

    fn call_span(&self, c: CallId) -> Span {
        self.ir.calls[c].span
    }

    fn func_of(&self, c: CallId) -> FuncId {
        self.ir.calls[c].func
    }

    fn func_name(&self, f: FuncId) -> &str {
        &self.ir.funcs[f].name
    }

    fn finding(&self, rule: Rule, span: Span, detail: &str) -> Finding {
        let (message, fix, leasehold) = advice(rule, self.lang, detail);
        Finding {
            rule,
            severity: rule.severity(),
            path: self.path.to_path_buf(),
            lang: self.lang,
            span,
            message,
            fix,
            leasehold,
        }
    }

    fn is_acquire(op: &Op) -> bool {
        matches!(op.kind, OpKind::Acquire | OpKind::TryLock | OpKind::SqlLock(_) | OpKind::LibLock)
    }

    /// The scope a key expression means the same thing in: a parameter only in its function.
    fn key_scope(&self, func: FuncId, k: &Expr) -> Option<FuncId> {
        match &k.kind {
            Kind::Name(n) if self.ir.funcs[func].params.iter().any(|p| p == n) => Some(func),
            _ => None,
        }
    }

    /// Keys set by an acquire in this file, normalised, with their scope.
    fn acquire_keys(&self) -> BTreeSet<(Option<FuncId>, String)> {
        self.ops
            .iter()
            .filter(|o| o.kind == OpKind::Acquire)
            .filter_map(|o| {
                o.key.as_ref().map(|k| (self.key_scope(self.func_of(o.call), k), norm(k)))
            })
            .collect()
    }

    fn known_key(&self, func: FuncId, k: &Expr, keys: &BTreeSet<(Option<FuncId>, String)>) -> bool {
        let n = norm(k);
        let scope = self.key_scope(func, k);
        keys.iter().any(|(s, x)| *x == n && (s.is_none() && scope.is_none() || *s == Some(func)))
    }

    fn is_lock_key(&self, op: &Op, keys: &BTreeSet<(Option<FuncId>, String)>) -> bool {
        let Some(k) = &op.key else { return false };
        let func = self.func_of(op.call);
        if self.known_key(func, k, keys) || names_lock(self.ir, func, k) {
            return true;
        }
        // Inside a release/renew helper (or a closure in one), its parameter or field is the
        // lock's key.
        let mut f = Some(func);
        for _ in 0..3 {
            let Some(id) = f else { break };
            let fname = self.func_name(id);
            let n = normalize(fname);
            let helper = lockish(fname)
                || ["release", "unlock", "renew", "extend", "refresh", "heartbeat", "keepalive"]
                    .iter()
                    .any(|w| n.contains(w));
            if helper && matches!(&k.kind, Kind::Name(_) | Kind::Field(_)) {
                return true;
            }
            f = self.ir.funcs[id].parent;
        }
        false
    }

    fn forced(&self, func: FuncId) -> bool {
        let mut f = Some(func);
        while let Some(id) = f {
            let n = normalize(self.func_name(id));
            if n.contains("force")
                || n.contains("breaklock")
                || n.starts_with("reset")
                || n.contains("steal")
            {
                return true;
            }
            f = self.ir.funcs[id].parent;
        }
        false
    }
}

pub(crate) fn run(cx: &Ctx<'_>) -> Out {
    let mut findings = Vec::new();
    let keys = cx.acquire_keys();
    let ir = cx.ir;

    // Acquires whose result a wrapper returns: the wrapper's callers are the acquires.
    let mut acquire_wrappers: HashMap<String, CallId> = HashMap::new();
    for op in cx.ops.iter().filter(|o| Ctx::is_acquire(o)) {
        let c = &ir.calls[op.call];
        if c.used == Use::Returned && c.func != 0 {
            let name = cx.func_name(c.func).to_owned();
            if !name.is_empty() {
                acquire_wrappers.insert(name, op.call);
            }
        }
    }

    // ---- nx-without-expiry, constant-lock-value, unchecked-acquire on Redis acquires.
    let mut absorbed_expires: BTreeSet<CallId> = BTreeSet::new();
    let expires: Vec<&Op> = cx.ops.iter().filter(|o| o.kind == OpKind::Expire).collect();
    for op in cx.ops.iter().filter(|o| o.kind == OpKind::Acquire) {
        let c = &ir.calls[op.call];
        if op.expiry.is_none() {
            let later_expire = op.key.as_ref().and_then(|k| {
                expires.iter().copied().find(|e| {
                    e.kind == OpKind::Expire
                        && ir.calls[e.call].func == c.func
                        && ir.calls[e.call].span.start_byte > c.span.start_byte
                        && e.key.as_ref().is_some_and(|ek| norm(ek) == norm(k))
                })
            });
            let detail = match later_expire {
                Some(e) => {
                    absorbed_expires.insert(e.call);
                    format!(
                        " (the expiry is set by a separate command, line {})",
                        ir.calls[e.call].span.start_line
                    )
                }
                None => String::new(),
            };
            findings.push(cx.finding(Rule::NxWithoutExpiry, c.span, &detail));
        }
        if let Some(v) = &op.value
            && let Some(what) = constant(ir, c.func, v, 0)
        {
            findings.push(cx.finding(Rule::ConstantLockValue, c.span, &what));
        }
        if let Some(why) = unchecked(cx, op.call) {
            findings.push(cx.finding(Rule::UncheckedAcquire, c.span, &why));
        }
    }

    // ---- Library try-locks and SQL try-locks: unchecked.
    for op in cx.ops.iter() {
        match &op.kind {
            OpKind::TryLock => {
                if let Some(why) = unchecked(cx, op.call) {
                    findings.push(cx.finding(Rule::UncheckedAcquire, cx.call_span(op.call), &why));
                }
            }
            OpKind::SqlLock(f) if sql::is_try(f) => {
                if let Some(why) = sql_unchecked(cx, op.call) {
                    findings.push(cx.finding(Rule::UncheckedAcquire, cx.call_span(op.call), &why));
                }
            }
            _ => {}
        }
    }
    // A wrapper's caller that drops the answer.
    for (i, c) in ir.calls.iter().enumerate() {
        if c.used == Use::Discarded
            && acquire_wrappers.contains_key(&c.name)
            && cx.func_name(c.func) != c.name
        {
            findings.push(cx.finding(
                Rule::UncheckedAcquire,
                c.span,
                &format!(" (`{}` returns whether it acquired)", c.name),
            ));
            let _ = i;
        }
    }

    // ---- release-without-owner-check / renew-without-owner-check on commands.
    let mut del_wrappers: Vec<(String, usize, Rule)> = Vec::new();
    for op in cx.ops.iter() {
        let rule = match op.kind {
            OpKind::Del => Rule::ReleaseWithoutOwnerCheck,
            OpKind::Expire if !absorbed_expires.contains(&op.call) => Rule::RenewWithoutOwnerCheck,
            OpKind::SetXx => Rule::RenewWithoutOwnerCheck,
            _ => continue,
        };
        let c = &ir.calls[op.call];
        if cx.forced(c.func) {
            continue;
        }
        if cx.is_lock_key(op, &keys) {
            if rule == Rule::ReleaseWithoutOwnerCheck && in_transaction(cx, op) {
                continue;
            }
            let detail = if rule == Rule::ReleaseWithoutOwnerCheck && compared_first(cx, op) {
                " (the GET and compare before it are a separate command: the key can change hands in between)"
            } else {
                ""
            };
            findings.push(cx.finding(rule, c.span, detail));
        } else if let Some(Expr { kind: Kind::Name(p), .. }) = &op.key
            && c.func != 0
        {
            // A generic helper (`remove(key)`): its callers decide whether it releases a lock.
            let params: Vec<&String> = ir.funcs[c.func]
                .params
                .iter()
                .filter(|p| !matches!(p.as_str(), "self" | "cls" | "this"))
                .collect();
            if let Some(i) = params.iter().position(|x| *x == p) {
                del_wrappers.push((cx.func_name(c.func).to_owned(), i, rule));
            }
        }
    }
    for (name, idx, rule) in &del_wrappers {
        if name.is_empty() {
            continue;
        }
        for (_, c) in ir.calls_named(name) {
            let Some(a) = c.args.get(*idx) else { continue };
            if cx.forced(c.func) {
                continue;
            }
            if cx.known_key(c.func, &a.expr, &keys) || names_lock(ir, c.func, &a.expr) {
                findings.push(cx.finding(
                    *rule,
                    c.span,
                    &format!(" (`{name}` deletes or extends the key as given)"),
                ));
            }
        }
    }

    // ---- Lua scripts.
    let has_lock_site = cx.ops.iter().any(Ctx::is_acquire) || !keys.is_empty();
    for (si, s) in cx.scripts {
        let lit = &ir.strings[*si];
        let related = has_lock_site
            || lit.assigned_to.as_deref().is_some_and(|n| {
                lockish(n)
                    || normalize(n).contains("release")
                    || normalize(n).contains("extend")
                    || normalize(n).contains("renew")
            })
            || lockish(cx.func_name(lit.func))
            || lit.call.is_some_and(|c| ir.calls[c].args.iter().any(|a| lockish(&a.expr.text)));
        if !related || cx.forced(lit.func) {
            continue;
        }
        if s.unchecked_del {
            findings.push(cx.finding(
                Rule::ReleaseWithoutOwnerCheck,
                lit.span,
                " (the script deletes the key without comparing ARGV with it)",
            ));
        }
        if s.unchecked_renew {
            findings.push(cx.finding(
                Rule::RenewWithoutOwnerCheck,
                lit.span,
                " (the script extends the key without comparing ARGV with it)",
            ));
        }
    }

    // ---- session-lock-on-pool.
    for op in cx.ops.iter() {
        let session = match &op.kind {
            OpKind::SqlLock(f) => sql::is_session(f),
            OpKind::SqlUnlock => true,
            _ => false,
        };
        if session && let Some(pool) = pooled(cx, op.call) {
            findings.push(cx.finding(
                Rule::SessionLockOnPool,
                cx.call_span(op.call),
                &format!(" (`{pool}`)"),
            ));
        }
    }

    // ---- timeout-misread / fail-open.
    let mut seen_handlers = BTreeSet::new();
    for op in cx.ops.iter().filter(|o| Ctx::is_acquire(o)) {
        let c = &ir.calls[op.call];
        if let Some(h) = c.handlers.first()
            && seen_handlers.insert(*h)
        {
            let hd = &ir.handlers[*h];
            let cleans_up = ir.calls.iter().any(|x| {
                x.span.start_byte >= hd.span.start_byte
                    && x.span.end_byte <= hd.span.end_byte
                    && matches!(
                        normalize(&x.name).as_str(),
                        "release"
                            | "unlock"
                            | "del"
                            | "delete"
                            | "unlink"
                            | "eval"
                            | "evalsha"
                            | "cleanup"
                            | "releaselock"
                    )
            });
            match hd.outcome {
                Outcome::Refuses if !cleans_up => findings.push(cx.finding(
                    Rule::TimeoutMisread,
                    hd.span,
                    " (the handler answers 'not acquired')",
                )),
                Outcome::Grants => findings.push(cx.finding(
                    Rule::TimeoutMisread,
                    hd.span,
                    " (the handler answers 'acquired')",
                )),
                Outcome::FallsThrough if hd.work_after => {
                    findings.push(cx.finding(Rule::FailOpen, hd.span, ""))
                }
                _ => {}
            }
        }
        // Rust: the Result folded into a bool.
        for (name, args) in &c.chain {
            let a: String = args.chars().filter(|c| !c.is_whitespace()).collect();
            match (name.as_str(), a.as_str()) {
                ("unwrap_or", "(false)") | ("unwrap_or_default", _) => findings.push(cx.finding(
                    Rule::TimeoutMisread,
                    c.span,
                    " (`unwrap_or(false)` answers 'not acquired')",
                )),
                ("unwrap_or", "(true)") => findings.push(cx.finding(
                    Rule::TimeoutMisread,
                    c.span,
                    " (`unwrap_or(true)` answers 'acquired')",
                )),
                _ => {}
            }
        }
        // Rust's `let _ = …` with no `?`: the error is dropped with the reply.
        if cx.lang == Lang::Rust
            && c.used == Use::Discarded
            && !c.tried
            && !c.chain.iter().any(|(n, _)| n == "unwrap" || n == "expect")
        {
            findings.push(cx.finding(
                Rule::FailOpen,
                c.span,
                " (the error is dropped with the reply)",
            ));
        }
    }

    // ---- unfenced-effect: once per function, at the call that really acquires.
    let mut fenced_funcs = BTreeSet::new();
    let mut acq: Vec<&Op> = cx.ops.iter().filter(|o| Ctx::is_acquire(o)).collect();
    acq.sort_by_key(|o| (o.kind == OpKind::LibLock, ir.calls[o.call].span.start_byte));
    for op in acq {
        let c = &ir.calls[op.call];
        if !fenced_funcs.insert(c.func) {
            continue;
        }
        if let Some(effect) = unfenced_write(cx, c.func, c.span.end_byte) {
            findings.push(cx.finding(
                Rule::UnfencedEffect,
                c.span,
                &format!(" ({effect}, line {})", effect_line(cx, c.func, c.span.end_byte)),
            ));
        }
    }

    findings.sort_by_key(|a| (a.span, a.rule));
    findings.dedup_by(|a, b| a.span == b.span && a.rule == b.rule);
    let inventory = inventory(cx, &findings, &keys);
    Out { findings, inventory }
}

/// Whether the value never identifies one holder: a literal, a host name, a pid.
fn constant(ir: &FileIr, func: FuncId, v: &Expr, depth: usize) -> Option<String> {
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

/// Why an acquire's reply counts as unread, or None.
fn unchecked(cx: &Ctx<'_>, call: CallId) -> Option<String> {
    let c = &cx.ir.calls[call];
    if c.unit_typed {
        return Some(" (it is converted to `()`, which accepts nil)".to_owned());
    }
    let chain: Vec<&str> = c.chain.iter().map(|(n, _)| n.as_str()).collect();
    if cx.lang == Lang::Go && chain.last() == Some(&"Err") {
        return Some(" (only `.Err()` is read: a held lock is not an error)".to_owned());
    }
    if chain.contains(&"is_ok") {
        return Some(" (`is_ok()` is true for 'not acquired' too)".to_owned());
    }
    match &c.used {
        Use::Discarded => Some(String::new()),
        Use::Bound(names) => bound_unread(cx, c, names),
        _ => None,
    }
}

/// Why a bound reply counts as unread, or None.
fn bound_unread(cx: &Ctx<'_>, c: &super::ir::Call, names: &[String]) -> Option<String> {
    {
        {
            let value = names.first()?;
            if value == "{destructured}" {
                let any = names[1..].iter().any(|n| cx.ir.read_after(c.func, n, c.span.end_byte));
                return (!any).then(|| " (nothing it binds is read)".to_owned());
            }
            if value == "_" || value.is_empty() {
                return Some(String::new());
            }
            let v = value.trim_start_matches("mut ").trim();
            if !cx.ir.read_after(c.func, v, c.span.end_byte) {
                return Some(format!(" (`{v}` is never read)"));
            }
            if only_null_checked(cx, c.func, v, c.span.end_byte) {
                return Some(format!(
                    " (`{v}` is only compared with null: 'not acquired' is not null)"
                ));
            }
            None
        }
    }
}

/// Whether every read of `v` after `after` is a null check (`v != null`, `v is not None`).
fn only_null_checked(cx: &Ctx<'_>, func: FuncId, v: &str, after: usize) -> bool {
    let reads: Vec<usize> = cx
        .ir
        .occurrences(v)
        .filter(|i| i.byte > after && cx.ir.within(i.func, func))
        .map(|i| i.byte)
        .collect();
    !reads.is_empty()
        && reads.iter().all(|b| {
            let rest = cx.src.get(b + v.len()..).unwrap_or("").trim_start();
            let rest: String = rest.chars().take(16).filter(|c| !c.is_whitespace()).collect();
            ["!=null", "!==null", "isnotNone", "!=nil", "!==undefined"]
                .iter()
                .any(|p| rest.starts_with(p))
        })
}

const FETCH: &[&str] = &[
    "fetchone",
    "fetchall",
    "fetchmany",
    "fetchval",
    "fetchrow",
    "scalar",
    "scalars",
    "first",
    "one",
    "getresultset",
    "next",
    "fetch",
    "fetchcolumn",
    "value",
    "getvalue",
    "scan",
    "rows",
    "getboolean",
    "getint",
    "row",
];

fn sql_unchecked(cx: &Ctx<'_>, call: CallId) -> Option<String> {
    let c = &cx.ir.calls[call];
    let name = normalize(&c.name);
    let chain: Vec<String> = c.chain.iter().map(|(n, _)| normalize(n)).collect();
    let exec_like = |n: &str| matches!(n, "exec" | "execcontext");
    if exec_like(&name)
        || chain.iter().any(|n| exec_like(n) || (cx.lang == Lang::Rust && n == "execute"))
    {
        return Some(
            " (it runs as a statement: the boolean it returns is never fetched)".to_owned(),
        );
    }
    if cx.lang == Lang::Java && name == "execute" {
        return Some(
            " (`execute` answers whether there is a result set, not whether the lock was taken)"
                .to_owned(),
        );
    }
    // A DB-API cursor: execute, then fetch from the same cursor.
    let recv = c.receiver.as_ref().map(norm);
    let fetched_later = cx.ir.calls.iter().any(|x| {
        x.func == c.func
            && x.span.start_byte > c.span.end_byte
            && FETCH.contains(&normalize(&x.name).as_str())
            && (x.receiver.as_ref().map(norm) == recv || x.receiver_call.is_none())
    });
    match &c.used {
        Use::Discarded if !fetched_later || chain.iter().any(|n| FETCH.contains(&n.as_str())) => {
            Some(" (nothing reads the row it returns)".to_owned())
        }
        Use::Bound(names) => bound_unread(cx, c, names),
        _ => None,
    }
}

/// The pool a SQL call goes through, if it does.
fn pooled(cx: &Ctx<'_>, call: CallId) -> Option<String> {
    let c = &cx.ir.calls[call];
    let poolish = |t: &str| -> bool {
        let last = t
            .rsplit(['.', ':', '>', '&', '*', ' ', '(', ')'])
            .find(|s| !s.is_empty())
            .unwrap_or("")
            .to_ascii_lowercase();
        last.ends_with("pool")
            || last.starts_with("pool")
            || matches!(
                last.as_str(),
                "engine"
                    | "jdbctemplate"
                    | "namedparameterjdbctemplate"
                    | "knex"
                    | "sequelize"
                    | "prisma"
                    | "database"
            )
            || (matches!(cx.lang, Lang::Go | Lang::JavaScript | Lang::TypeScript | Lang::Tsx)
                && last == "db")
            || (cx.lang == Lang::Ruby && t == "DB")
    };
    if let Some(r) = &c.receiver
        && poolish(&r.text)
    {
        return Some(r.text.clone());
    }
    // A connection borrowed for a block only: the lock outlives the borrow unless the
    // unlock (or, for an unlock, the lock) is in the same block.
    if let Some(r) = &c.receiver {
        let at = c.span.start_byte;
        for b in
            cx.ir.borrows.iter().filter(|b| b.name == norm(r) && b.scope.0 <= at && at < b.scope.1)
        {
            let l = b.source.to_ascii_lowercase();
            if !(l.contains("pool") || l.contains("engine")) {
                continue;
            }
            let is_lock =
                cx.ops.iter().any(|o| o.call == call && matches!(o.kind, OpKind::SqlLock(_)));
            let partner = cx.ops.iter().any(|o| {
                let oc = &cx.ir.calls[o.call];
                o.call != call
                    && b.scope.0 <= oc.span.start_byte
                    && oc.span.start_byte < b.scope.1
                    && if is_lock {
                        o.kind == OpKind::SqlUnlock
                    } else {
                        matches!(o.kind, OpKind::SqlLock(_))
                    }
            });
            if !partner {
                return Some(b.source.clone());
            }
        }
    }
    if matches!(cx.lang, Lang::JavaScript | Lang::TypeScript | Lang::Tsx)
        && c.name == "sql"
        && c.receiver.is_none()
    {
        return Some("sql".to_owned());
    }
    // sqlx and friends: the executor is an argument of the call that runs the query.
    for (n, args) in &c.chain {
        if matches!(
            n.as_str(),
            "fetch_one" | "fetch_optional" | "fetch_all" | "execute" | "fetch" | "query" | "exec"
        ) && args.to_ascii_lowercase().contains("pool")
        {
            return Some(args.trim_matches(['(', ')']).to_owned());
        }
    }
    if cx.lang == Lang::Rust
        && c.args.iter().any(|a| a.expr.text.to_ascii_lowercase().contains("pool"))
    {
        return c
            .args
            .iter()
            .find(|a| a.expr.text.to_ascii_lowercase().contains("pool"))
            .map(|a| a.expr.text.clone());
    }
    None
}

/// A GET of the same key before a DEL in the same function.
fn compared_first(cx: &Ctx<'_>, del: &Op) -> bool {
    let c = &cx.ir.calls[del.call];
    let Some(k) = &del.key else { return false };
    cx.ops.iter().any(|o| {
        o.kind == OpKind::Get
            && cx.ir.calls[o.call].func == c.func
            && cx.ir.calls[o.call].span.start_byte < c.span.start_byte
            && o.key.as_ref().is_some_and(|ok| norm(ok) == norm(k))
    })
}

/// WATCH of the key and MULTI before the DEL, in the same function: an optimistic transaction.
fn in_transaction(cx: &Ctx<'_>, del: &Op) -> bool {
    let c = &cx.ir.calls[del.call];
    let before = |k: &OpKind| {
        cx.ops.iter().any(|o| {
            &o.kind == k
                && cx.ir.calls[o.call].func == c.func
                && cx.ir.calls[o.call].span.start_byte <= c.span.start_byte
        })
    };
    before(&OpKind::Watch) && before(&OpKind::Multi)
}

fn fence_in_sight(cx: &Ctx<'_>, func: FuncId) -> bool {
    cx.facts().fence_funcs.iter().any(|f| cx.ir.within(*f, func))
}

/// What the effect rules need of the whole file, computed once.
pub(crate) struct Facts {
    /// Functions that mention a fence, a version or an idempotency key.
    fence_funcs: Vec<FuncId>,
    /// Writes to other resources: (byte, line, what, function).
    writes: Vec<(usize, usize, String, FuncId)>,
}

pub(crate) fn facts(ir: &FileIr) -> Facts {
    let mut fence_funcs = BTreeSet::new();
    for i in &ir.idents {
        let l = i.name.to_ascii_lowercase();
        if FENCE_WORDS.iter().any(|w| l.contains(w)) {
            fence_funcs.insert(i.func);
        }
    }
    let mut writes = Vec::new();
    for s in &ir.strings {
        let l = s.text.to_ascii_lowercase();
        if FENCE_WORDS.iter().any(|w| l.contains(w)) {
            fence_funcs.insert(s.func);
        }
        if sql::analyze(&s.text).is_some_and(|q| q.writes && q.lock.is_none()) {
            writes.push((s.span.start_byte, s.span.start_line, "an SQL write".to_owned(), s.func));
        }
    }
    for c in &ir.calls {
        if let Some(w) = call_write(c) {
            writes.push((c.span.start_byte, c.span.start_line, w.to_owned(), c.func));
        }
    }
    Facts { fence_funcs: fence_funcs.into_iter().collect(), writes }
}

/// A write to another resource in `func` after `after`, with no fence in sight.
fn unfenced_write(cx: &Ctx<'_>, func: FuncId, after: usize) -> Option<String> {
    let w = first_write(cx, func, after)?;
    (!fence_in_sight(cx, func)).then_some(w.1)
}

fn effect_line(cx: &Ctx<'_>, func: FuncId, after: usize) -> usize {
    first_write(cx, func, after).map_or(0, |w| w.0)
}

fn first_write(cx: &Ctx<'_>, func: FuncId, after: usize) -> Option<(usize, String)> {
    cx.facts()
        .writes
        .iter()
        .filter(|w| w.0 > after && cx.ir.within(w.3, func))
        .min_by_key(|w| w.0)
        .map(|w| (w.1, w.2.clone()))
}

/// Whether a call writes to another resource: an HTTP write, an ORM save.
fn call_write(c: &super::ir::Call) -> Option<&'static str> {
    {
        let n = normalize(&c.name);
        let rw = c.receiver.as_ref().map(|r| r.words.clone()).unwrap_or_default();
        let http_recv = rw.iter().any(|w| {
            matches!(
                w.as_str(),
                "requests"
                    | "httpx"
                    | "axios"
                    | "http"
                    | "httpclient"
                    | "httprequest"
                    | "resttemplate"
                    | "webclient"
                    | "guzzle"
                    | "faraday"
                    | "got"
                    | "superagent"
                    | "reqwest"
                    | "net"
                    | "client"
                    | "session"
            )
        });
        let method_arg = c.args.iter().any(|a| {
            a.expr.words.iter().any(|w| {
                matches!(w.as_str(), "methodpost" | "methodput" | "methodpatch" | "methoddelete")
            })
        });
        let what = match n.as_str() {
            _ if method_arg => Some("an HTTP write"),
            "postforobject" | "postforentity" | "postforlocation" => Some("an HTTP write"),
            "post" | "put" | "patch"
                if http_recv || c.receiver.as_ref().is_some_and(|r| r.text == "Http") =>
            {
                Some("an HTTP write")
            }
            "fetch"
                if c.args.iter().any(|a| {
                    a.expr.words.iter().any(|w| matches!(w.as_str(), "post" | "put" | "patch"))
                }) =>
            {
                Some("an HTTP write")
            }
            "save" | "saveandflush" | "persist" | "executeupdate" | "updateall" | "insertone"
            | "updateone" | "replaceone" | "bulkwrite" | "upsert" => Some("a database write"),
            _ => None,
        };
        what
    }
}

fn inventory(
    cx: &Ctx<'_>,
    findings: &[Finding],
    keys: &BTreeSet<(Option<FuncId>, String)>,
) -> Vec<LockSite> {
    let ir = cx.ir;
    let mut out = Vec::new();
    let script_release = cx.scripts.iter().any(|(_, s)| s.checked_del);
    let script_renew = cx.scripts.iter().any(|(_, s)| s.checked_renew);
    let bad_release_script = cx.scripts.iter().any(|(_, s)| s.unchecked_del);
    let bad_renew_script = cx.scripts.iter().any(|(_, s)| s.unchecked_renew);
    let lib_release = cx.ops.iter().any(|o| o.kind == OpKind::LibRelease);
    let sql_unlock = cx.ops.iter().any(|o| o.kind == OpKind::SqlUnlock);
    // Per file, once: the keys deleted and extended, and which findings sit where.
    let acq_keys: BTreeSet<&String> = keys.iter().map(|(_, k)| k).collect();
    let keyed = |pred: &dyn Fn(&OpKind) -> bool| -> (BTreeSet<String>, bool) {
        let ks: BTreeSet<String> = cx
            .ops
            .iter()
            .filter(|o| pred(&o.kind))
            .filter_map(|o| o.key.as_ref().map(norm))
            .collect();
        let any_lock = ks.iter().any(|k| acq_keys.contains(k));
        (ks, any_lock)
    };
    let (del_keys, del_any) = keyed(&|k| *k == OpKind::Del);
    let (exp_keys, exp_any) = keyed(&|k| matches!(k, OpKind::Expire | OpKind::SetXx));
    let mut at_span: HashMap<Span, Vec<Rule>> = HashMap::new();
    for f in findings {
        at_span.entry(f.span).or_default().push(f.rule);
    }
    let file_rules: Vec<Rule> = findings
        .iter()
        .map(|f| f.rule)
        .filter(|r| {
            matches!(
                r,
                Rule::ReleaseWithoutOwnerCheck
                    | Rule::RenewWithoutOwnerCheck
                    | Rule::SessionLockOnPool
            )
        })
        .collect();
    for op in cx.ops.iter().filter(|o| Ctx::is_acquire(o)) {
        let c = &ir.calls[op.call];
        let k = op.key.as_ref().map(norm);
        let dels = del_any || k.as_ref().is_some_and(|k| del_keys.contains(k));
        let exps = exp_any || k.as_ref().is_some_and(|k| exp_keys.contains(k));
        let (release, renew) = match &op.kind {
            OpKind::SqlLock(f) => {
                let r = if sql::is_session(f) && sql_unlock {
                    Checked::WithSession
                } else if sql::is_session(f) {
                    Checked::None
                } else {
                    Checked::WithSession
                };
                (r, Checked::WithSession)
            }
            OpKind::TryLock | OpKind::LibLock => {
                (if lib_release { Checked::OwnerChecked } else { Checked::None }, Checked::None)
            }
            _ => (
                if dels || bad_release_script {
                    Checked::Unchecked
                } else if script_release || lib_release {
                    Checked::OwnerChecked
                } else {
                    Checked::None
                },
                if exps || bad_renew_script {
                    Checked::Unchecked
                } else if script_renew {
                    Checked::OwnerChecked
                } else {
                    Checked::None
                },
            ),
        };
        let owner = match &op.value {
            None => match &op.kind {
                OpKind::SqlLock(_) => "the session".to_owned(),
                _ => "the library".to_owned(),
            },
            Some(v) => match constant(ir, c.func, v, 0) {
                Some(what) => what,
                None => {
                    let l = v.text.to_ascii_lowercase();
                    if ["uuid", "random", "token", "secret", "nanoid", "ulid", "guid", "urandom"]
                        .iter()
                        .any(|w| l.contains(w))
                    {
                        format!("unique ({})", v.text)
                    } else {
                        v.text.clone()
                    }
                }
            },
        };
        let expiry = match (&op.kind, &op.expiry) {
            (OpKind::SqlLock(f), _) => {
                if sql::is_session(f) { "session" } else { "transaction" }.to_owned()
            }
            (OpKind::TryLock, _) => "library".to_owned(),
            (OpKind::LibLock, Some(e)) => e.clone(),
            (OpKind::LibLock, None) => "library default".to_owned(),
            (_, Some(e)) => e.clone(),
            (_, None) => "none".to_owned(),
        };
        let mut rules: Vec<Rule> = at_span.get(&c.span).cloned().unwrap_or_default();
        if op.store != Store::Other {
            rules.extend(file_rules.iter().copied());
        }
        rules.sort();
        rules.dedup();
        let key = match &op.kind {
            OpKind::SqlLock(_) => {
                c.args.iter().skip(1).map(|a| a.expr.text.clone()).collect::<Vec<_>>().join(", ")
            }
            OpKind::TryLock => c.receiver.as_ref().map(|r| r.text.clone()).unwrap_or_default(),
            _ => op.key.as_ref().map(|k| k.text.clone()).unwrap_or_default(),
        };
        out.push(LockSite {
            path: cx.path.to_path_buf(),
            lang: cx.lang,
            span: c.span,
            store: op.store,
            api: op.api.clone(),
            key,
            expiry,
            owner,
            release,
            renew,
            fence: if fence_in_sight(cx, c.func) { "fence".to_owned() } else { "none".to_owned() },
            findings: rules,
        });
    }
    out
}
