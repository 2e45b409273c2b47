//! The questions the rules ask of one file's lock operations again and again (the EXPIRE after
//! this SETNX, a GET before this DEL, a WATCH and MULTI around it, who releases), answered from
//! maps built once per file: asked by scanning every operation, they made a file of n lock
//! functions cost n² (a generated 1.6 MB Python file took 10 s in release).

use std::collections::{HashMap, HashSet};

use super::ir::{CallId, FileIr, FuncId};
use super::keys::norm;
use super::ops::{Op, OpKind, normalize};

pub(super) struct OpIndex {
    /// EXPIREs by (function, normalised key), in file order.
    expires: HashMap<(FuncId, String), Vec<CallId>>,
    /// The first GET's start byte by (function, normalised key).
    first_get: HashMap<(FuncId, String), usize>,
    /// The first WATCH's and the first MULTI's start byte in each function.
    first_watch: HashMap<FuncId, usize>,
    first_multi: HashMap<FuncId, usize>,
    /// Functions that hold, directly or in a nested function, a call named after an unlock
    /// or a release.
    releasing: HashSet<FuncId>,
}

impl OpIndex {
    pub(super) fn new(ir: &FileIr, ops: &[Op]) -> OpIndex {
        let mut ix = OpIndex {
            expires: HashMap::new(),
            first_get: HashMap::new(),
            first_watch: HashMap::new(),
            first_multi: HashMap::new(),
            releasing: HashSet::new(),
        };
        for o in ops {
            let c = &ir.calls[o.call];
            let start = c.span.start_byte;
            let first = |m: &mut HashMap<FuncId, usize>| {
                let e = m.entry(c.func).or_insert(start);
                *e = (*e).min(start);
            };
            match o.kind {
                OpKind::Expire => {
                    if let Some(k) = &o.key {
                        ix.expires.entry((c.func, norm(k))).or_default().push(o.call);
                    }
                }
                OpKind::Get => {
                    if let Some(k) = &o.key {
                        let e = ix.first_get.entry((c.func, norm(k))).or_insert(start);
                        *e = (*e).min(start);
                    }
                }
                OpKind::Watch => first(&mut ix.first_watch),
                OpKind::Multi => first(&mut ix.first_multi),
                _ => {}
            }
        }
        for c in &ir.calls {
            let n = normalize(&c.name);
            if !(n.contains("unlock") || n.contains("release")) {
                continue;
            }
            // The function and every one it is nested in; stop where an earlier call marked.
            let mut f = Some(c.func);
            while let Some(id) = f {
                if !ix.releasing.insert(id) {
                    break;
                }
                f = ir.funcs.get(id).and_then(|x| x.parent);
            }
        }
        ix
    }

    /// The first EXPIRE of `acquire`'s key after it in the same function.
    pub(super) fn later_expire(&self, ir: &FileIr, acquire: &Op) -> Option<CallId> {
        let c = &ir.calls[acquire.call];
        let list = self.expires.get(&(c.func, norm(acquire.key.as_ref()?)))?;
        // Calls are in pre-order, so a list in call order is in start order.
        let at = list.partition_point(|e| ir.calls[*e].span.start_byte <= c.span.start_byte);
        list.get(at).copied()
    }

    /// A GET of the same key before a DEL in the same function.
    pub(super) fn compared_first(&self, ir: &FileIr, del: &Op) -> bool {
        let c = &ir.calls[del.call];
        let Some(k) = &del.key else { return false };
        self.first_get.get(&(c.func, norm(k))).is_some_and(|g| *g < c.span.start_byte)
    }

    /// WATCH of the key and MULTI before the DEL, in its function or one it is nested in: an
    /// optimistic transaction. The DEL may sit in a block given to `multi`
    /// (`redis.multi { |t| t.del(k) }`).
    pub(super) fn in_transaction(&self, ir: &FileIr, del: &Op) -> bool {
        let c = &ir.calls[del.call];
        let before = |m: &HashMap<FuncId, usize>| {
            let mut f = Some(c.func);
            while let Some(id) = f {
                if m.get(&id).is_some_and(|s| *s <= c.span.start_byte) {
                    return true;
                }
                f = ir.funcs.get(id).and_then(|x| x.parent);
            }
            false
        };
        before(&self.first_watch) && before(&self.first_multi)
    }

    /// Whether function `g` holds, directly or nested, a call named after an unlock or a
    /// release.
    pub(super) fn releases(&self, g: FuncId) -> bool {
        self.releasing.contains(&g)
    }
}
