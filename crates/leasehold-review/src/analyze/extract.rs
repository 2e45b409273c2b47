//! From a tree-sitter tree to [`FileIr`]: one pass collects the nodes of interest with their
//! enclosing function, a second builds the IR with every cross-reference (a call's receiver
//! call, an argument that is a call) resolved.

use std::collections::HashMap;

use tree_sitter::{Node, Parser, Tree};

use super::ir::{Arg, Assign, Borrow, Call, Expr, FileIr, Func, FuncId, Ident, Kind, StrLit, Use};
use super::langs::{self, Spec};
use super::protecting::Protecting;
use crate::{Lang, Span};

/// Expressions keep at most this many words: enough for any call's options.
const MAX_WORDS: usize = 96;

/// Parses within a time budget: tree-sitter's error recovery can go superlinear on input that
/// is not the language it expects (20,000 lines of bare statements read as Java took minutes).
/// None when the parser gave up or ran out of time; the caller notes the file.
pub(crate) fn parse(lang: Lang, src: &str) -> Option<Tree> {
    let mut p = Parser::new();
    p.set_language(&langs::language(lang)).ok()?;
    let start = std::time::Instant::now();
    // Healthy parsing runs at several MB/s; allow 10× that and at least 2 s.
    let budget = std::time::Duration::from_millis(2_000 + (src.len() / 1_000) as u64);
    let mut give_up = |_: &tree_sitter::ParseState| start.elapsed() > budget;
    let bytes = src.as_bytes();
    let mut read = |i: usize, _: tree_sitter::Point| bytes.get(i..).unwrap_or(&[]);
    p.parse_with_options(
        &mut read,
        None,
        Some(tree_sitter::ParseOptions::new().progress_callback(&mut give_up)),
    )
}

pub(crate) fn span(n: Node<'_>, src: &str) -> Span {
    let s = n.start_position();
    let e = n.end_position();
    Span {
        start_line: s.row + 1,
        start_col: col(src, n.start_byte(), s.column),
        end_line: e.row + 1,
        end_col: col(src, n.end_byte(), e.column),
        start_byte: n.start_byte(),
        end_byte: n.end_byte(),
    }
}

/// 1-based character column of `byte`, whose byte column in its line is `byte_col`.
fn col(src: &str, byte: usize, byte_col: usize) -> usize {
    let start = byte.saturating_sub(byte_col);
    src.get(start..byte).map_or(byte_col, |l| l.chars().count()) + 1
}

struct Collected<'t> {
    funcs: Vec<(Node<'t>, Option<FuncId>)>,
    calls: Vec<(Node<'t>, FuncId)>,
    strings: Vec<(Node<'t>, FuncId)>,
    assigns: Vec<(Node<'t>, FuncId)>,
    tries: Vec<(Node<'t>, FuncId)>,
    ifs: Vec<(Node<'t>, FuncId)>,
    idents: Vec<Ident>,
    borrows: Vec<Borrow>,
    heredocs: Vec<Node<'t>>,
}

pub(crate) fn extract(lang: Lang, tree: &Tree, src: &str) -> FileIr {
    let spec = langs::spec(lang);
    let root = tree.root_node();
    let mut col = Collected {
        funcs: vec![(root, None)],
        calls: Vec::new(),
        strings: Vec::new(),
        assigns: Vec::new(),
        tries: Vec::new(),
        ifs: Vec::new(),
        idents: Vec::new(),
        borrows: Vec::new(),
        heredocs: Vec::new(),
    };
    // Pre-order walk with an explicit cursor (no recursion: generated files nest deeply).
    let mut stack: Vec<(FuncId, usize)> = vec![(0, usize::MAX)];
    let mut cur = root.walk();
    let mut parents: HashMap<usize, Node<'_>> = HashMap::new();
    let mut ancestors: Vec<Node<'_>> = Vec::new();
    'walk: loop {
        let n = cur.node();
        if let Some(p) = ancestors.last() {
            parents.insert(n.id(), *p);
        }
        while stack.len() > 1 && n.start_byte() >= stack.last().map_or(usize::MAX, |s| s.1) {
            stack.pop();
        }
        let func = stack.last().map_or(0, |s| s.0);
        let kind = n.kind();
        let mut descend = true;
        // Comments are extras; so is a Ruby heredoc's body, which is code.
        let comment = n.is_extra() && kind.contains("comment");
        if n.is_named() && !comment {
            if spec.funcs.contains(&kind) {
                col.funcs.push((n, Some(func)));
                stack.push((col.funcs.len() - 1, n.end_byte()));
            }
            let func = stack.last().map_or(0, |s| s.0);
            if spec.calls.contains(&kind) {
                col.calls.push((n, func));
            }
            // A literal split over `+` (Java, JavaScript, Go, Python, Ruby) or `.` (PHP) is
            // one string: Redisson's scripts are written so.
            let in_concat = ancestors
                .last()
                .is_some_and(|p| p.kind() == "concatenated_string" || is_concat(&spec, *p, src, 0));
            if !in_concat && (spec.strings.contains(&kind) || is_concat(&spec, n, src, 0)) {
                col.strings.push((n, func));
            }
            if spec.assigns.contains(&kind) {
                col.assigns.push((n, func));
            }
            if spec.tries.contains(&kind) {
                col.tries.push((n, func));
            }
            if kind == "heredoc_beginning" {
                col.heredocs.push(n);
            }
            if let Some(b) = borrow(n, src, &ancestors) {
                col.borrows.push(b);
            }
            if matches!(kind, "if_statement" | "if_expression" | "match_expression") {
                col.ifs.push((n, func));
            }
            if spec.idents.contains(&kind) {
                let name = node_text(n, src).trim_start_matches(['$', '@']).to_owned();
                col.idents.push(Ident { func, byte: n.start_byte(), name });
                descend = false;
            }
        } else if comment {
            descend = false;
        }
        if descend && cur.goto_first_child() {
            ancestors.push(n);
            continue;
        }
        loop {
            if cur.goto_next_sibling() {
                continue 'walk;
            }
            if !cur.goto_parent() {
                break 'walk;
            }
            ancestors.pop();
        }
    }

    let mut ir = FileIr { had_errors: root.has_error(), ..FileIr::default() };
    for (n, parent) in &col.funcs {
        let (name, params) = if parent.is_none() {
            (String::new(), Vec::new())
        } else {
            langs::func_parts(&spec, *n, src)
        };
        ir.funcs.push(Func {
            name,
            range: (n.start_byte(), n.end_byte()),
            params,
            parent: *parent,
        });
    }
    let call_ids: HashMap<usize, usize> =
        col.calls.iter().enumerate().map(|(i, (n, _))| (n.id(), i)).collect();
    let b = Builder { spec: &spec, src, call_ids: &call_ids, parents: &parents };

    // Handlers first: calls record which handlers protect them.
    for (n, _) in &col.tries {
        b.try_handlers(*n, &mut ir.handlers);
    }
    for (n, _) in &col.ifs {
        b.if_handlers(*n, &mut ir.handlers);
    }

    let mut protecting = Protecting::new(&ir.handlers);
    for (n, func) in &col.calls {
        let Some(parts) = langs::call_parts(&spec, *n, src) else {
            // Keep ids aligned with `call_ids`: an unreadable call is an empty one.
            ir.calls.push(Call {
                func: *func,
                span: span(*n, src),
                name: String::new(),
                receiver: None,
                receiver_call: None,
                args: Vec::new(),
                chain: Vec::new(),
                used: Use::Other,
                unit_typed: false,
                tried: false,
                in_return: false,
                handlers: Vec::new(),
            });
            continue;
        };
        let receiver_call = parts.receiver.and_then(|r| call_ids.get(&b.unwrap(r).id()).copied());
        let receiver = parts.receiver.map(|r| b.expr(r));
        let args =
            parts.args.iter().map(|(k, v)| Arg { name: k.clone(), expr: b.expr(*v) }).collect();
        let (chain, used, top, mut unit_typed, tried) = b.usage(*n);
        if let Some(t) = parts.turbofish {
            unit_typed |= is_unit_turbofish(node_text(t, src));
        }
        let at = n.start_byte();
        let end = top.end_byte();
        let handlers = protecting.at(&ir.handlers, at, end);
        ir.calls.push(Call {
            func: *func,
            span: span(*n, src),
            name: parts.name,
            receiver,
            receiver_call,
            args,
            chain,
            used,
            unit_typed,
            tried,
            in_return: b.reaches_return(top),
            handlers,
        });
    }
    // A chained call's turbofish says how the whole chain's reply is read.
    for i in 0..ir.calls.len() {
        if ir.calls[i].unit_typed
            && let Some(r) = ir.calls[i].receiver_call
        {
            let mut r = Some(r);
            while let Some(id) = r {
                ir.calls[id].unit_typed = true;
                r = ir.calls[id].receiver_call;
            }
        }
    }
    for (n, func) in &col.assigns {
        for (l, r) in langs::assign_parts(&spec, *n) {
            let (name, mut field) = b.lhs_name(l);
            // Struct literals set fields: `&Locker{self: …}`, `Lock { owner: … }`.
            field |= matches!(n.kind(), "keyed_element" | "field_initializer");
            if name.is_empty() {
                continue;
            }
            ir.assigns.push(Assign { func: *func, name, field, value: b.expr(r) });
        }
    }
    let mut heredoc_bodies = 0;
    for (n, func) in &col.strings {
        let text = b.string_text(*n);
        // A Ruby heredoc's body sits after its line; its opener is where it is used.
        let at = if n.kind() == "heredoc_body" {
            heredoc_bodies += 1;
            col.heredocs.get(heredoc_bodies - 1).copied().unwrap_or(*n)
        } else {
            *n
        };
        let call = b.enclosing_arg_call(at);
        let assigned_to = b.assigned_name(at);
        ir.strings.push(StrLit { func: *func, span: span(at, src), text, call, assigned_to });
    }
    ir.borrows = col.borrows;
    ir.idents = col.idents;
    ir.index();
    ir
}

/// `with pool.connection() as conn:` (Python) and `pool.with_connection do |conn|` (Ruby).
fn borrow(n: Node<'_>, src: &str, ancestors: &[Node<'_>]) -> Option<Borrow> {
    match n.kind() {
        "with_item" => {
            let v = n.child_by_field_name("value")?;
            if v.kind() != "as_pattern" {
                return None;
            }
            let mut c = v.walk();
            let kids: Vec<Node<'_>> = v.named_children(&mut c).collect();
            let source = node_text(*kids.first()?, src).to_owned();
            let alias = v.child_by_field_name("alias").or_else(|| kids.last().copied())?;
            let name = node_text(alias, src).trim().to_owned();
            let stmt = *ancestors.iter().rev().nth(1)?;
            Some(Borrow { name, source, scope: (stmt.start_byte(), stmt.end_byte()) })
        }
        "do_block" | "block" => {
            let call = *ancestors.last()?;
            if call.kind() != "call" {
                return None;
            }
            let method = node_text(call.child_by_field_name("method")?, src);
            if !matches!(method, "with_connection" | "checkout" | "connection" | "synchronize") {
                return None;
            }
            let params = n.child_by_field_name("parameters")?;
            let mut c = params.walk();
            let first = params.named_children(&mut c).next()?;
            Some(Borrow {
                name: node_text(first, src).to_owned(),
                source: node_text(call, src).lines().next().unwrap_or("").to_owned(),
                scope: (n.start_byte(), n.end_byte()),
            })
        }
        _ => None,
    }
}

/// Whether `n` joins string literals only, with `+` (or PHP's `.`).
fn is_concat(spec: &Spec, n: Node<'_>, src: &str, depth: usize) -> bool {
    if depth > 64 || !matches!(n.kind(), "binary_expression" | "binary_operator" | "binary") {
        return false;
    }
    let op = n.child_by_field_name("operator").map(|o| node_text(o, src));
    if !matches!(op, Some("+" | ".")) {
        return false;
    }
    let side = |f: &str| {
        n.child_by_field_name(f).is_some_and(|x| {
            spec.strings.contains(&x.kind())
                || is_concat(spec, x, src, depth + 1)
                || (x.kind() == "parenthesized_expression"
                    && x.named_child(0).is_some_and(|y| spec.strings.contains(&y.kind())))
        })
    };
    side("left") && side("right")
}

fn is_unit_turbofish(t: &str) -> bool {
    let t: String = t.chars().filter(|c| !c.is_whitespace()).collect();
    t == "<()>" || t.ends_with(",()>")
}

pub(crate) fn node_text<'a>(n: Node<'_>, src: &'a str) -> &'a str {
    src.get(n.byte_range()).unwrap_or("")
}

pub(super) struct Builder<'a, 't> {
    pub(super) spec: &'a Spec,
    pub(super) src: &'a str,
    pub(super) call_ids: &'a HashMap<usize, usize>,
    /// Each walked node's parent: tree-sitter's own `parent()` walks down from the root, which
    /// is quadratic on deep trees.
    parents: &'a HashMap<usize, Node<'t>>,
}

impl<'t> Builder<'_, 't> {
    pub(super) fn up(&self, n: Node<'t>) -> Option<Node<'t>> {
        self.parents.get(&n.id()).copied()
    }

    /// Whether `n`'s value flows into a `return` within a few enclosing expressions.
    fn reaches_return(&self, n: Node<'t>) -> bool {
        let mut cur = n;
        for _ in 0..8 {
            let Some(p) = self.up(cur) else { return false };
            let k = p.kind();
            if self.spec.returns.contains(&k) {
                return true;
            }
            if self.spec.expr_stmts.contains(&k)
                || self.spec.blocks.contains(&k)
                || self.spec.assigns.contains(&k)
                || self.spec.funcs.contains(&k)
            {
                return false;
            }
            cur = p;
        }
        false
    }

    pub(super) fn text(&self, n: Node<'t>) -> &str {
        node_text(n, self.src)
    }

    /// Looks through await, parentheses, `?` and references.
    pub(super) fn unwrap(&self, mut n: Node<'t>) -> Node<'t> {
        while self.spec.transparent.contains(&n.kind()) {
            let mut c = n.walk();
            let inner = n.named_children(&mut c).find(|x| !x.is_extra());
            match inner {
                Some(i) => n = i,
                None => break,
            }
        }
        n
    }

    fn expr(&self, n: Node<'t>) -> Expr {
        let n0 = n;
        let n = self.unwrap(n);
        let kind = self.kind(n);
        let mut words = Vec::new();
        self.words(n0, &mut words);
        // Only the head of the text: a receiver can be a whole chain, and a chain can be the
        // whole file when error recovery nests every line in the one before.
        let raw = self.text(n0);
        let cut = (0..=raw.len().min(320)).rev().find(|i| raw.is_char_boundary(*i)).unwrap_or(0);
        let raw = &raw[..cut];
        let mut text = String::with_capacity(raw.len().min(160));
        for w in raw.split_whitespace() {
            if !text.is_empty() {
                text.push(' ');
            }
            text.push_str(w);
            if text.len() > 160 {
                break;
            }
        }
        Expr { span: span(n0, self.src), text, kind, words }
    }

    fn kind(&self, n: Node<'t>) -> Kind {
        let k = n.kind();
        if self.spec.strings.contains(&k) || k == "string_content" {
            let t = self.string_text(n);
            return if self.has_interpolation(n) { Kind::Template(t) } else { Kind::Str(t) };
        }
        if self.spec.calls.contains(&k) {
            return self.call_ids.get(&n.id()).map_or(Kind::Other, |i| Kind::Call(*i));
        }
        match k {
            "true" => return Kind::Bool(true),
            "false" => return Kind::Bool(false),
            "boolean" | "boolean_literal" => {
                return Kind::Bool(self.text(n).eq_ignore_ascii_case("true"));
            }
            "none" | "null" | "nil" | "null_literal" | "undefined" => return Kind::Null,
            _ => {}
        }
        if k.contains("integer") || k.contains("float") || k == "number" || k == "int_literal" {
            return Kind::Num(self.text(n).to_owned());
        }
        if k == "instance_variable" {
            return Kind::Field(self.text(n).trim_start_matches('@').to_owned());
        }
        if self.spec.idents.contains(&k) {
            return Kind::Name(self.text(n).trim_start_matches('$').to_owned());
        }
        if let Some(f) = self.field_of_this(n) {
            return Kind::Field(f);
        }
        Kind::Other
    }

    /// `self.x`, `this.x`, `$this->x`, `this->x`, Go/Rust `recv.x`: the field name.
    pub(super) fn field_of_this(&self, n: Node<'t>) -> Option<String> {
        let (obj, prop) = match n.kind() {
            "attribute" => ("object", "attribute"),
            "member_expression" => ("object", "property"),
            "field_access" => ("object", "field"),
            "member_access_expression" => ("object", "name"),
            "selector_expression" => ("operand", "field"),
            "field_expression" => ("value", "field"),
            _ => return None,
        };
        let o = n.child_by_field_name(obj)?;
        let p = n.child_by_field_name(prop)?;
        let ot = self.text(o).trim_start_matches('$');
        let this = matches!(ot, "self" | "this" | "cls")
            || (matches!(self.spec.lang, Lang::Go) && o.kind() == "identifier" && ot.len() <= 2);
        this.then(|| self.text(p).to_owned())
    }

    fn has_interpolation(&self, n: Node<'t>) -> bool {
        let mut c = n.walk();
        let found = n.named_children(&mut c).any(|x| {
            matches!(
                x.kind(),
                "interpolation"
                    | "template_substitution"
                    | "variable_name"
                    | "simple_variable"
                    | "member_access_expression"
            ) || x.kind().ends_with("interpolation")
        });
        found
            || (n.kind() == "concatenated_string" && {
                let mut c = n.walk();
                n.named_children(&mut c).any(|s| self.has_interpolation(s))
            })
    }

    /// The literal text of a string node: its content fragments joined, `{}` for each
    /// interpolated part; escapes kept as written except `\n`, `\t` and quotes.
    fn string_text(&self, n: Node<'t>) -> String {
        if is_concat(self.spec, n, self.src, 0) {
            let side =
                |f: &str| n.child_by_field_name(f).map(|x| self.string_text(x)).unwrap_or_default();
            return side("left") + &side("right");
        }
        if n.kind() == "parenthesized_expression"
            && let Some(x) = n.named_child(0)
        {
            return self.string_text(x);
        }
        let mut out = String::new();
        let mut cur = n.walk();
        let mut any = false;
        for ch in n.named_children(&mut cur) {
            let k = ch.kind();
            if k == "string" || k == "heredoc_body" {
                out.push_str(&self.string_text(ch));
                any = true;
            } else if k.contains("content")
                || k == "string_fragment"
                || k == "string_value"
                || k == "escape_sequence"
            {
                out.push_str(&unescape(self.text(ch)));
                any = true;
            } else if k.ends_with("interpolation")
                || k == "template_substitution"
                || k.contains("variable")
            {
                out.push_str("{}");
                any = true;
            }
        }
        if !any {
            // Go, Rust and Java raw strings keep their text between the delimiters.
            let t = self.text(n);
            let t = t.trim_start_matches(['r', 'b', '#', 'f', 'u', 'R', 'B', 'F', 'U']);
            let t = t.trim_end_matches('#');
            let t = t.strip_prefix("\"\"\"").and_then(|x| x.strip_suffix("\"\"\"")).unwrap_or(t);
            let t = t.trim_matches(|c| c == '"' || c == '\'' || c == '`');
            return unescape(t);
        }
        out
    }

    fn words(&self, n: Node<'t>, out: &mut Vec<String>) {
        let mut stack = vec![n];
        // Bounded in nodes visited too: a left-deep nest would otherwise be walked to its
        // bottom for every call in it.
        let mut visits = 0;
        while let Some(x) = stack.pop() {
            visits += 1;
            if out.len() >= MAX_WORDS || visits > 4 * MAX_WORDS {
                return;
            }
            let k = x.kind();
            if x.is_extra() {
                continue;
            }
            if self.spec.strings.contains(&k) {
                let t = self.string_text(x).to_ascii_lowercase();
                out.push(t.trim().to_owned());
                continue;
            }
            if x.child_count() == 0 || k == "simple_symbol" || k == "hash_key_symbol" {
                let t = self.text(x).trim_start_matches([':', '$', '@']).trim_end_matches(':');
                if t.chars().next().is_some_and(|c| c.is_alphanumeric() || c == '_') {
                    out.push(t.to_ascii_lowercase());
                }
                continue;
            }
            let mut c = x.walk();
            let kids: Vec<Node<'t>> = x.children(&mut c).collect();
            stack.extend(kids.into_iter().rev());
        }
    }
}

fn unescape(s: &str) -> String {
    if !s.contains('\\') {
        return s.to_owned();
    }
    s.replace("\\n", "\n").replace("\\t", "\t").replace("\\\"", "\"").replace("\\'", "'")
}
