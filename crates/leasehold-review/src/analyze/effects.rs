//! What a lock guards: writes to other resources (SQL writes, HTTP writes, ORM saves) and
//! whether a fence, a version or an idempotency key is in sight of them, computed once per
//! file for `unfenced-effect` and the inventory's fence column.

use std::collections::{BTreeSet, HashSet};

use super::ir::{FileIr, FuncId};
use super::ops::normalize;
use super::sql;

const FENCE_WORDS: &[&str] =
    &["fence", "fencing", "generation", "epoch", "idempoten", "version", "revision"];

/// Whether `func`, or a function nested in it, mentions a fence, a version or an idempotency
/// key.
pub(super) fn fence_in_sight(facts: &Facts, func: FuncId) -> bool {
    facts.fenced.contains(&func)
}

/// What the effect rules need of the whole file, computed once.
pub(crate) struct Facts {
    /// Functions that mention a fence, a version or an idempotency key, and every function
    /// they are nested in.
    fenced: HashSet<FuncId>,
    /// Writes to other resources: (byte, line, what, function), by byte (ties in the order
    /// found).
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
    writes.sort_by_key(|w| w.0);
    let mut fenced = HashSet::new();
    for f in fence_funcs {
        let mut f = Some(f);
        while let Some(id) = f {
            if !fenced.insert(id) {
                break;
            }
            f = ir.funcs.get(id).and_then(|x| x.parent);
        }
    }
    Facts { fenced, writes }
}

/// A write to another resource in `func` after `after`, with no fence in sight.
pub(super) fn unfenced_write(
    ir: &FileIr,
    facts: &Facts,
    func: FuncId,
    after: usize,
) -> Option<String> {
    let w = first_write(ir, facts, func, after)?;
    (!fence_in_sight(facts, func)).then_some(w.1)
}

pub(super) fn effect_line(ir: &FileIr, facts: &Facts, func: FuncId, after: usize) -> usize {
    first_write(ir, facts, func, after).map_or(0, |w| w.0)
}

/// The first write after `after` in `func` or a function nested in it. Those lie within the
/// function's bytes, so only the writes between `after` and its end are looked at.
fn first_write(ir: &FileIr, facts: &Facts, func: FuncId, after: usize) -> Option<(usize, String)> {
    let end = ir.funcs.get(func).map_or(usize::MAX, |f| f.range.1);
    let from = facts.writes.partition_point(|w| w.0 <= after);
    facts.writes[from..]
        .iter()
        .inspect(|_| super::work::add(1))
        .take_while(|w| w.0 < end)
        .find(|w| ir.within(w.3, func))
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
        match n.as_str() {
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
        }
    }
}
