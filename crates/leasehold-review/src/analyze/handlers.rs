//! Error handlers and what they do after an error: `except`/`catch`/`rescue`, Go's
//! `if err != nil`, Rust's `if let Err` and `match` arms; whether they propagate, answer
//! "not acquired" or "acquired", or fall through into the work.

use tree_sitter::Node;

use super::extract::{Builder, span};
use super::ir::{Handler, Outcome};
use crate::Lang;

impl<'t> Builder<'_, 't> {
    pub(super) fn try_handlers(&self, n: Node<'t>, out: &mut Vec<Handler>) {
        let k = n.kind();
        let mut c = n.walk();
        let kids: Vec<Node<'t>> = n.named_children(&mut c).collect();
        let clause_kinds = ["except_clause", "catch_clause", "rescue", "except_group_clause"];
        let clauses: Vec<Node<'t>> =
            kids.iter().copied().filter(|x| clause_kinds.contains(&x.kind())).collect();
        if clauses.is_empty() {
            return;
        }
        let protects = match n.child_by_field_name("body") {
            Some(b) if k != "body_statement" => (b.start_byte(), b.end_byte()),
            _ => (n.start_byte(), clauses[0].start_byte()),
        };
        // Ruby's method-level rescue has nothing after it in the method.
        let work_after = k != "body_statement" && self.code_follows(n);
        for cl in clauses {
            let body = cl
                .child_by_field_name("body")
                .or_else(|| {
                    let mut c = cl.walk();
                    cl.named_children(&mut c)
                        .filter(|x| {
                            matches!(
                                x.kind(),
                                "block" | "then" | "compound_statement" | "statement_block"
                            )
                        })
                        .last()
                })
                .unwrap_or(cl);
            out.push(Handler {
                span: span(cl, self.src),
                protects,
                outcome: self.outcome(body),
                work_after,
            });
        }
    }

    /// Go's `if err != nil { … }` after (or around) a call; Rust's `if let Err(…) = …` and
    /// `match … { Err(…) => … }`.
    pub(super) fn if_handlers(&self, n: Node<'t>, out: &mut Vec<Handler>) {
        match (self.spec.lang, n.kind()) {
            (Lang::Go, "if_statement") => {
                let Some(cond) = n.child_by_field_name("condition") else { return };
                let ct: String = self.text(cond).split_whitespace().collect();
                if !(ct.contains("err!=nil") || ct.contains("Err!=nil")) {
                    return;
                }
                let protects = match n.child_by_field_name("initializer") {
                    Some(i) => (i.start_byte(), i.end_byte()),
                    None => match prev_statement(n) {
                        Some(p) => (p.start_byte(), p.end_byte()),
                        None => return,
                    },
                };
                let Some(body) = n.child_by_field_name("consequence") else { return };
                out.push(Handler {
                    span: span(n, self.src),
                    protects,
                    outcome: self.outcome(body),
                    work_after: self.code_follows(n),
                });
            }
            (Lang::Rust, "if_expression") => {
                let Some(cond) = n.child_by_field_name("condition") else { return };
                if cond.kind() != "let_condition" {
                    return;
                }
                let Some(pat) = cond.child_by_field_name("pattern") else { return };
                if !self.text(pat).trim_start().starts_with("Err") {
                    return;
                }
                let Some(v) = cond.child_by_field_name("value") else { return };
                let Some(body) = n.child_by_field_name("consequence") else { return };
                out.push(Handler {
                    span: span(n, self.src),
                    protects: self.protected_value(n, v),
                    outcome: self.outcome(body),
                    work_after: self.code_follows(n),
                });
            }
            (Lang::Rust, "match_expression") => {
                let Some(v) = n.child_by_field_name("value") else { return };
                let Some(body) = n.child_by_field_name("body") else { return };
                let mut c = body.walk();
                for arm in body.named_children(&mut c).filter(|a| a.kind() == "match_arm") {
                    let Some(pat) = arm.child_by_field_name("pattern") else { continue };
                    if !self.text(pat).trim_start().starts_with("Err") {
                        continue;
                    }
                    let Some(val) = arm.child_by_field_name("value") else { continue };
                    out.push(Handler {
                        span: span(arm, self.src),
                        protects: self.protected_value(n, v),
                        outcome: self.outcome(val),
                        work_after: self.code_follows(n),
                    });
                }
            }
            _ => {}
        }
    }

    /// What an `if let Err(…) = v` protects: `v`, or, when `v` is a name bound by the statement
    /// just before, that statement.
    fn protected_value(&self, stmt: Node<'t>, v: Node<'t>) -> (usize, usize) {
        let name = self.text(v).trim_start_matches('&').trim();
        if name.chars().all(|c| c.is_alphanumeric() || c == '_') {
            let mut s = stmt;
            if let Some(p) = self.up(s).filter(|p| p.kind() == "expression_statement") {
                s = p;
            }
            if let Some(prev) = prev_statement(s)
                && prev.kind() == "let_declaration"
            {
                return (prev.start_byte(), prev.end_byte());
            }
        }
        (v.start_byte(), v.end_byte())
    }

    /// Whether a statement of the same block follows `n` (or the statement holding it).
    fn code_follows(&self, n: Node<'t>) -> bool {
        let mut cur = n;
        for _ in 0..3 {
            let mut s = cur.next_named_sibling();
            while let Some(x) = s {
                if !x.is_extra()
                    && !matches!(x.kind(), "else_clause" | "finally_clause" | "ensure" | "else")
                {
                    return true;
                }
                s = x.next_named_sibling();
            }
            match self.up(cur) {
                Some(p)
                    if !self.spec.blocks.contains(&p.kind())
                        && !self.spec.funcs.contains(&p.kind()) =>
                {
                    cur = p
                }
                _ => return false,
            }
        }
        false
    }

    /// What a handler's body does: propagate, refuse, grant, or fall through.
    fn outcome(&self, body: Node<'t>) -> Outcome {
        let mut first_return: Option<Node<'t>> = None;
        // `acquired = False` in the handler: the answer it leaves for the code after.
        let mut assigned: Option<Outcome> = None;
        let mut jumps = false;
        let mut stack = vec![body];
        while let Some(x) = stack.pop() {
            let k = x.kind();
            if x.id() != body.id()
                && self.spec.funcs.contains(&k)
                && k != "block"
                && k != "do_block"
            {
                continue;
            }
            match k {
                "raise_statement" | "throw_statement" | "throw_expression" | "retry" => {
                    return Outcome::Propagates;
                }
                "continue_statement"
                | "break_statement"
                | "continue_expression"
                | "break_expression"
                | "next"
                | "break" => jumps = true,
                _ => {}
            }
            if self.spec.assigns.contains(&k) && assigned.is_none() {
                let t = self.text(x).to_ascii_lowercase();
                if let Some((_, v)) = t.rsplit_once('=') {
                    let v = v.trim().trim_end_matches(';');
                    // `held = true` then on into the work is failing open, not a misread.
                    assigned = match v {
                        "false" | "none" | "nil" | "null" => Some(Outcome::Refuses),
                        _ => None,
                    };
                }
            }
            if self.spec.returns.contains(&k) {
                let v = self
                    .text(x)
                    .split_whitespace()
                    .skip(1)
                    .collect::<Vec<_>>()
                    .join(" ")
                    .to_ascii_lowercase();
                if v.contains("err") || v.contains("exception") {
                    return Outcome::Propagates;
                }
                if first_return.is_none_or(|r| x.start_byte() < r.start_byte()) {
                    first_return = Some(x);
                }
            }
            if self.spec.calls.contains(&k) || k == "macro_invocation" {
                let t = self.text(x);
                let head = t.split(['(', '!', ' ']).next().unwrap_or("");
                if matches!(
                    head,
                    "raise"
                        | "panic"
                        | "log.Fatal"
                        | "log.Fatalf"
                        | "log.Panic"
                        | "log.Panicf"
                        | "os.Exit"
                        | "sys.exit"
                        | "exit"
                        | "die"
                        | "abort"
                        | "bail"
                        | "process.exit"
                        | "unreachable"
                        | "fail"
                ) || head.ends_with(".Fatal")
                    || head.ends_with(".Fatalf")
                    || (self.spec.lang == Lang::Ruby && t.starts_with("raise"))
                {
                    return Outcome::Propagates;
                }
            }
            if self.spec.lang == Lang::Ruby
                && k == "identifier"
                && matches!(self.text(x), "raise" | "retry")
            {
                return Outcome::Propagates;
            }
            let mut c = x.walk();
            stack.extend(x.named_children(&mut c));
        }
        if let Some(r) = first_return {
            let v: String = self.text(r).split_whitespace().skip(1).collect::<Vec<_>>().join(" ");
            let v = v.trim_end_matches(';').trim();
            let lower = v.to_ascii_lowercase();
            return literal_outcome(&lower);
        }
        if jumps {
            return Outcome::Refuses;
        }
        // Ruby's rescue and Rust's arm: the last expression is the value.
        if matches!(self.spec.lang, Lang::Ruby | Lang::Rust) {
            let mut c = body.walk();
            let last = body.named_children(&mut c).filter(|x| !x.is_extra()).last();
            let t = last.map_or_else(|| self.text(body).to_owned(), |l| self.text(l).to_owned());
            let t = t.trim().trim_end_matches(';').to_ascii_lowercase();
            if matches!(t.as_str(), "false" | "nil" | "true" | "ok(false)" | "ok(true)" | "none") {
                return literal_outcome(&t);
            }
        }
        assigned.unwrap_or(Outcome::FallsThrough)
    }
}

/// A returned value: false-like is a refusal, true-like a grant, anything else a check.
fn literal_outcome(v: &str) -> Outcome {
    let v = v.trim().trim_start_matches('(').trim_end_matches(')');
    // Go's several results: the first says whether it acquired.
    let v = match v.split_once(',') {
        Some((first, _)) if !v.starts_with("ok(") && !v.starts_with("some(") => first.trim(),
        _ => v,
    };
    match v {
        "true" | "true, nil" | "ok(true)" | "some(true)" => Outcome::Grants,
        "" | "false" | "none" | "null" | "nil" | "0" | "-1" | "false, nil" | "nil, nil"
        | "undefined" | "ok(false)" | "ok(none)" | "some(false)" | "self::failure"
        | "self::success" => Outcome::Refuses,
        _ => Outcome::Checks,
    }
}

fn prev_statement(n: Node<'_>) -> Option<Node<'_>> {
    let mut s = n.prev_named_sibling();
    while let Some(x) = s {
        if !x.is_extra() {
            return Some(x);
        }
        s = x.prev_named_sibling();
    }
    None
}
