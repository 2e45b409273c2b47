//! How a call's value is used where it is made: the chain of calls made on it, and whether it
//! is discarded, bound to names, tested, or returned; the name an assignment binds, and the
//! call a literal is an argument of.

use tree_sitter::Node;

use super::extract::Builder;
use super::ir::Use;
use super::langs;
use crate::Lang;

impl<'t> Builder<'_, 't> {
    /// Climbs from a call through what passes its value on: the chain of calls made on it,
    /// await, `?`, parentheses. Returns the chain, how the final value is used, the topmost
    /// node, and whether it is typed as unit (`let _: () =`).
    pub(super) fn usage(
        &self,
        call: Node<'t>,
    ) -> (Vec<(String, String)>, Use, Node<'t>, bool, bool) {
        let mut chain = Vec::new();
        let mut tried = false;
        let mut cur = call;
        let mut steps = 0;
        while let Some(p) = self.up(cur) {
            // Real chains are short; a pathological nest is cut rather than walked per call.
            steps += 1;
            if steps > 64 {
                break;
            }
            if self.spec.transparent.contains(&p.kind()) {
                tried |= p.kind() == "try_expression";
                cur = p;
                continue;
            }
            // A call made on this value: `x.m()` where x is `cur`.
            let recv_of = |c: Node<'t>| -> bool {
                langs::call_parts(self.spec, c, self.src)
                    .and_then(|parts| parts.receiver)
                    .is_some_and(|r| self.unwrap(r).id() == cur.id() || r.id() == cur.id())
            };
            if recv_of(p) {
                let parts = langs::call_parts(self.spec, p, self.src);
                let args = p
                    .child_by_field_name("arguments")
                    .map(|a| self.text(a).to_owned())
                    .unwrap_or_default();
                chain.push((parts.map(|x| x.name).unwrap_or_default(), args));
                cur = p;
                continue;
            }
            if matches!(
                p.kind(),
                "attribute"
                    | "member_expression"
                    | "selector_expression"
                    | "field_expression"
                    | "await_expression"
            ) && let Some(pp) = self.up(p)
                && recv_of(pp)
            {
                let parts = langs::call_parts(self.spec, pp, self.src);
                let args = pp
                    .child_by_field_name("arguments")
                    .map(|a| self.text(a).to_owned())
                    .unwrap_or_default();
                chain.push((parts.map(|x| x.name).unwrap_or_default(), args));
                cur = pp;
                continue;
            }
            // Rust: `.await` is a field-like node between the call and the next method.
            if p.kind() == "await_expression" {
                cur = p;
                continue;
            }
            break;
        }
        let (used, unit) = match self.up(cur) {
            None => (Use::Other, false),
            Some(p) => self.use_in(p, cur),
        };
        (chain, used, cur, unit, tried)
    }

    fn use_in(&self, p: Node<'t>, child: Node<'t>) -> (Use, bool) {
        let k = p.kind();
        if self.spec.expr_stmts.contains(&k) {
            return (Use::Discarded, false);
        }
        if self.spec.lang == Lang::Ruby && self.spec.blocks.contains(&k) {
            let mut s = child.next_named_sibling();
            while let Some(x) = s {
                if !x.is_extra() && !matches!(x.kind(), "rescue" | "ensure" | "else") {
                    return (Use::Discarded, false);
                }
                s = x.next_named_sibling();
            }
            return (Use::Returned, false);
        }
        if self.spec.lang == Lang::Rust && k == "block" {
            return (Use::Returned, false);
        }
        if self.spec.lang == Lang::Go
            && matches!(k, "expression_list")
            && let Some(pp) = self.up(p)
        {
            return self.use_in(pp, p);
        }
        if self.spec.lang == Lang::Python && k == "pattern_list" {
            return (Use::Other, false);
        }
        if self.spec.assigns.contains(&k) {
            let right = langs::assign_parts(self.spec, p);
            let lhs = match (self.spec.lang, k) {
                (Lang::Go, _) => p.child_by_field_name("left"),
                _ => right.iter().find(|(_, r)| r.id() == child.id()).map(|(l, _)| *l),
            };
            let unit = self.spec.lang == Lang::Rust
                && p.child_by_field_name("type")
                    .is_some_and(|t| self.text(t).replace(' ', "") == "()");
            let Some(lhs) = lhs else { return (Use::Other, unit) };
            let mut names = Vec::new();
            let mut c = lhs.walk();
            if self.spec.idents.contains(&lhs.kind()) || lhs.kind() == "_" {
                names.push(self.text(lhs).trim_start_matches(['$', '@']).to_owned());
            } else if lhs.kind().contains("pattern")
                && lhs.kind() != "tuple_pattern"
                && lhs.kind() != "pattern_list"
            {
                // `const { rows } = …`, `[a, b] = …`: every name bound.
                let mut st = vec![lhs];
                while let Some(x) = st.pop() {
                    if x.child_count() == 0 && x.is_named() {
                        names.push(self.text(x).to_owned());
                    }
                    let mut c2 = x.walk();
                    st.extend(x.named_children(&mut c2));
                }
                names.insert(0, String::from("{destructured}"));
            } else if matches!(
                lhs.kind(),
                "expression_list" | "pattern_list" | "tuple_pattern" | "left_assignment_list"
            ) {
                for x in lhs.named_children(&mut c) {
                    names.push(self.text(x).trim_start_matches(['$', '@']).to_owned());
                }
            } else {
                let (n, _) = self.lhs_name(lhs);
                names.push(if n.is_empty() { self.text(lhs).to_owned() } else { n });
            }
            if names.iter().all(|n| n == "_") {
                return (Use::Discarded, unit);
            }
            return (Use::Bound(names), unit);
        }
        if self.spec.conditions.contains(&k) {
            return (Use::Condition, false);
        }
        if self.spec.returns.contains(&k) {
            return (Use::Returned, false);
        }
        if matches!(k, "expression_list")
            && let Some(pp) = self.up(p)
        {
            return self.use_in(pp, p);
        }
        (Use::Other, false)
    }

    /// The name on an assignment's left: the last identifier; whether it is a field.
    pub(super) fn lhs_name(&self, l: Node<'t>) -> (String, bool) {
        let k = l.kind();
        if k == "instance_variable" {
            return (self.text(l).trim_start_matches('@').to_owned(), true);
        }
        if self.spec.idents.contains(&k) || k == "constant" || k == "variable_name" || k == "name" {
            return (self.text(l).trim_start_matches('$').to_owned(), false);
        }
        if let Some(f) = self.field_of_this(l) {
            return (f, true);
        }
        if matches!(k, "expression_list" | "pattern_list" | "tuple_pattern") {
            return (String::new(), false);
        }
        // `x: T` patterns, `mut x`, typed names: the last identifier.
        let mut last = String::new();
        let mut c = l.walk();
        for ch in l.named_children(&mut c) {
            if self.spec.idents.contains(&ch.kind()) {
                last = self.text(ch).trim_start_matches('$').to_owned();
            }
        }
        (last, false)
    }

    /// The call a string is (directly, or inside an array/concatenation/template) an argument of.
    pub(super) fn enclosing_arg_call(&self, n: Node<'t>) -> Option<usize> {
        let mut cur = n;
        for _ in 0..6 {
            let p = self.up(cur)?;
            if let Some(id) = self.call_ids.get(&p.id()) {
                return Some(*id);
            }
            if self.spec.funcs.contains(&p.kind()) || self.spec.assigns.contains(&p.kind()) {
                return None;
            }
            cur = p;
        }
        None
    }

    pub(super) fn assigned_name(&self, n: Node<'t>) -> Option<String> {
        let mut cur = n;
        for _ in 0..3 {
            let p = self.up(cur)?;
            if self.spec.assigns.contains(&p.kind()) {
                for (l, r) in langs::assign_parts(self.spec, p) {
                    if r.id() == cur.id() {
                        let (name, _) = self.lhs_name(l);
                        return (!name.is_empty()).then_some(name);
                    }
                }
                return None;
            }
            cur = p;
        }
        None
    }
}
