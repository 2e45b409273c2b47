//! The lock inventory: one row per lock site, from the same operations and findings the
//! rules used.

use std::collections::{BTreeSet, HashMap};

use super::ctx::Ctx;
use super::effects::fence_in_sight;
use super::ir::FuncId;
use super::keys::norm;
use super::ops::OpKind;
use super::owner::constant;
use super::sql;
use crate::{Checked, Finding, LockSite, Rule, Span, Store};

pub(super) fn inventory(
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
    // Each rule once: a file of n release findings would otherwise give each of its n sites
    // n rules to sort.
    let file_rules: BTreeSet<Rule> = findings
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
        super::work::add(rules.len());
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
            fence: if fence_in_sight(cx.facts(), c.func) {
                "fence".to_owned()
            } else {
                "none".to_owned()
            },
            findings: rules,
        });
    }
    out
}
