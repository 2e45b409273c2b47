//! The rules, over one file's lock operations. Each finding is tied to the call, script or
//! handler it is about; the inventory is built from the same facts.

use std::collections::{BTreeSet, HashMap};

pub(crate) use super::ctx::Ctx;
use super::effects::{effect_line, unfenced_write};
use super::inventory::inventory;
use super::ir::{CallId, Expr, FuncId, Kind, Outcome, Use};
use super::keys::{lockish, names_lock, norm};
use super::opindex::OpIndex;
use super::ops::{Op, OpKind, normalize};
use super::owner::{HolderActs, constant};
use super::sql;
use crate::{Finding, Lang, LockSite, Rule};

pub(crate) struct Out {
    pub findings: Vec<Finding>,
    pub inventory: Vec<LockSite>,
}

pub(crate) fn run(cx: &Ctx<'_>) -> Out {
    let mut findings = Vec::new();
    let keys = cx.acquire_keys();
    let ir = cx.ir;

    // Acquires whose result a wrapper returns: the wrapper's callers are the acquires.
    let mut acquire_wrappers: HashMap<String, CallId> = HashMap::new();
    for op in cx.ops.iter().filter(|o| Ctx::is_acquire(o)) {
        let c = &ir.calls[op.call];
        if (c.used == Use::Returned || c.in_return || returned_later(cx, c)) && c.func != 0 {
            let name = cx.func_name(c.func).to_owned();
            if !name.is_empty() {
                acquire_wrappers.insert(name, op.call);
            }
        }
    }

    // ---- nx-without-expiry, constant-lock-value, unchecked-acquire on Redis acquires.
    let ix = OpIndex::new(ir, cx.ops);
    let mut absorbed_expires: BTreeSet<CallId> = BTreeSet::new();
    let mut constant_values = Vec::new();
    for op in cx.ops.iter().filter(|o| o.kind == OpKind::Acquire) {
        let c = &ir.calls[op.call];
        if op.expiry.is_none() {
            let detail = match ix.later_expire(ir, op) {
                Some(e) => {
                    absorbed_expires.insert(e);
                    format!(
                        " (the expiry is set by a separate command, line {})",
                        ir.calls[e].span.start_line
                    )
                }
                None => String::new(),
            };
            findings.push(cx.finding(Rule::NxWithoutExpiry, c.span, &detail));
        }
        if let Some(v) = &op.value
            && let Some(what) = constant(ir, c.func, v, 0)
        {
            // Reported below if the value matters.
            constant_values.push((op, cx.finding(Rule::ConstantLockValue, c.span, &what)));
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
            if rule == Rule::ReleaseWithoutOwnerCheck && ix.in_transaction(ir, op) {
                continue;
            }
            let detail = if rule == Rule::ReleaseWithoutOwnerCheck && ix.compared_first(ir, op) {
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
    let mut helper_keys = Vec::new();
    for (name, idx, rule) in &del_wrappers {
        if name.is_empty() {
            continue;
        }
        for (_, c) in ir.calls_named(name) {
            let Some(a) = c.args.get(*idx) else { continue };
            helper_keys.push(norm(&a.expr));
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

    // ---- constant-lock-value, where something acts on the key as its holder.
    let acts = HolderActs::new(cx.ops, cx.scripts, &absorbed_expires, helper_keys);
    findings.extend(
        constant_values.into_iter().filter(|(op, _)| acts.on(op.key.as_ref())).map(|(_, f)| f),
    );

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
        let forced_name = lit.assigned_to.as_deref().is_some_and(|n| {
            let n = normalize(n);
            n.contains("force") || n.starts_with("reset") || n.contains("breaklock")
        });
        if !related || cx.forced(lit.func) || forced_name {
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
            // Calls start in file order: only those from the handler's start to its end.
            let cleans_up = ir
                .calls_from(hd.span.start_byte)
                .map(|(_, x)| x)
                .take_while(|x| x.span.start_byte <= hd.span.end_byte)
                .any(|x| {
                    let n = normalize(&x.name);
                    x.span.end_byte <= hd.span.end_byte
                        && (n.contains("unlock")
                            || n.contains("release")
                            || matches!(
                                n.as_str(),
                                "del" | "delete" | "unlink" | "eval" | "evalsha" | "cleanup"
                            ))
                });
            match hd.outcome {
                Outcome::Refuses if !cleans_up && !cleaned_by_caller(cx, &ix, c.func) => findings
                    .push(cx.finding(
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
        if let Some(effect) = unfenced_write(cx.ir, cx.facts(), c.func, c.span.end_byte) {
            findings.push(cx.finding(
                Rule::UnfencedEffect,
                c.span,
                &format!(
                    " ({effect}, line {})",
                    effect_line(cx.ir, cx.facts(), c.func, c.span.end_byte)
                ),
            ));
        }
    }

    findings.sort_by_key(|a| (a.span, a.rule));
    findings.dedup_by(|a, b| a.span == b.span && a.rule == b.rule);
    let mut inventory = inventory(cx, &findings, &keys);
    // One row per call: a statement chosen among several lock functions is one site.
    inventory.dedup_by(|a, b| a.span == b.span && a.api == b.api);
    inventory.dedup_by(|a, b| a.span == b.span);
    Out { findings, inventory }
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
            if !read_anywhere(cx, c, v) {
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

/// Whether `v` is read anywhere in the call's function other than where it is written: a
/// loop reads what the last turn bound (`while (ttl != null) { ttl = tryAcquire(); }`).
fn read_anywhere(cx: &Ctx<'_>, c: &super::ir::Call, v: &str) -> bool {
    cx.ir.occurrences_in(v, c.func).any(|i| {
        let in_call = c.span.start_byte <= i.byte && i.byte < c.span.end_byte;
        !in_call && !is_write(cx.src, i.byte + v.len())
    })
}

/// Whether the name ending at `end` is assigned to, not read (`x =`, `x :=`, `x, err :=`).
fn is_write(src: &str, end: usize) -> bool {
    let rest = src.get(end..).unwrap_or("").trim_start();
    let line = rest.lines().next().unwrap_or("");
    (rest.starts_with('=') && !rest.starts_with("==") && !rest.starts_with("=>"))
        || rest.starts_with(":=")
        || (rest.starts_with(',') && line.split('(').next().unwrap_or("").contains('='))
}

/// Whether the name an acquire's reply is bound to is returned (`const reply = …; return
/// reply === 'OK'`).
fn returned_later(cx: &Ctx<'_>, c: &super::ir::Call) -> bool {
    let Use::Bound(names) = &c.used else { return false };
    let Some(v) = names.first() else { return false };
    cx.ir.occurrences_in_from(v, c.func, c.span.end_byte + 1).any(|i| {
        let line_start = cx.src[..i.byte].rfind('\n').map_or(0, |p| p + 1);
        cx.src[line_start..i.byte].trim_start().starts_with("return")
    })
}

/// Whether a function whose acquire answers 'not acquired' on an error is called only from
/// code that releases on failure (Redlock's quorum loop unlocks every instance).
fn cleaned_by_caller(cx: &Ctx<'_>, ix: &OpIndex, f: FuncId) -> bool {
    let name = cx.func_name(f);
    if name.is_empty() || f == 0 {
        return false;
    }
    cx.ir.calls_named(name).any(|(_, call)| ix.releases(call.func))
}

/// Whether every read of `v` after `after` is a null check (`v != null`, `v is not None`).
fn only_null_checked(cx: &Ctx<'_>, func: FuncId, v: &str, after: usize) -> bool {
    let reads: Vec<usize> = cx.ir.occurrences_in_from(v, func, after + 1).map(|i| i.byte).collect();
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
    // Calls of the function lie within its bytes, and calls start in file order.
    let func_end = cx.ir.funcs[c.func].range.1;
    let fetched_later = cx
        .ir
        .calls_from(c.span.end_byte + 1)
        .map(|(_, x)| x)
        .take_while(|x| x.span.start_byte < func_end)
        .any(|x| {
            x.func == c.func
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
        let t = t.replace(" as any", "").replace(" as unknown", "");
        let t = t.trim_matches(['(', ')']);
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
                    | "datasource"
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
