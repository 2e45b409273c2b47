//! One file's facts as the rules and the inventory read them: the IR, the lock operations,
//! the scripts, and what they decide together (which keys are locks', which functions force).

use std::collections::BTreeSet;
use std::path::Path;

use super::advice::advice;
use super::effects::{Facts, facts};
use super::ir::{CallId, Expr, FileIr, FuncId, Kind};
use super::keys::{lockish, names_lock, norm};
use super::lua::Script;
use super::ops::{Op, OpKind, normalize};
use crate::{Finding, Lang, Rule, Span};

pub(crate) struct Ctx<'a> {
    pub facts: std::cell::OnceCell<Facts>,
    pub path: &'a Path,
    pub src: &'a str,
    pub lang: Lang,
    pub ir: &'a FileIr,
    pub ops: &'a [Op],
    pub scripts: &'a [(usize, Script)],
}

impl Ctx<'_> {
    pub(super) fn facts(&self) -> &Facts {
        self.facts.get_or_init(|| facts(self.ir))
    }

    pub(super) fn call_span(&self, c: CallId) -> Span {
        self.ir.calls[c].span
    }

    pub(super) fn func_of(&self, c: CallId) -> FuncId {
        self.ir.calls[c].func
    }

    pub(super) fn func_name(&self, f: FuncId) -> &str {
        &self.ir.funcs[f].name
    }

    pub(super) fn finding(&self, rule: Rule, span: Span, detail: &str) -> Finding {
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

    pub(super) fn is_acquire(op: &Op) -> bool {
        matches!(op.kind, OpKind::Acquire | OpKind::TryLock | OpKind::SqlLock(_) | OpKind::LibLock)
    }

    /// The scope a key expression means the same thing in: a parameter only in its function.
    pub(super) fn key_scope(&self, func: FuncId, k: &Expr) -> Option<FuncId> {
        match &k.kind {
            Kind::Name(n) if self.ir.funcs[func].params.iter().any(|p| p == n) => Some(func),
            _ => None,
        }
    }

    /// Keys set by an acquire in this file, normalised, with their scope.
    pub(super) fn acquire_keys(&self) -> BTreeSet<(Option<FuncId>, String)> {
        self.ops
            .iter()
            .filter(|o| o.kind == OpKind::Acquire)
            .filter_map(|o| {
                o.key.as_ref().map(|k| (self.key_scope(self.func_of(o.call), k), norm(k)))
            })
            .collect()
    }

    pub(super) fn known_key(
        &self,
        func: FuncId,
        k: &Expr,
        keys: &BTreeSet<(Option<FuncId>, String)>,
    ) -> bool {
        let n = norm(k);
        let scope = self.key_scope(func, k);
        // Set by a file-wide key when this one is file-wide, or by this function's own.
        let wide = scope.is_none() && keys.contains(&(None, n.clone()));
        wide || keys.contains(&(Some(func), n))
    }

    pub(super) fn is_lock_key(&self, op: &Op, keys: &BTreeSet<(Option<FuncId>, String)>) -> bool {
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

    pub(super) fn forced(&self, func: FuncId) -> bool {
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
