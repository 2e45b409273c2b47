//! What each language's tree-sitter grammar calls the things [`super::ir`] needs: calls and
//! their parts, functions, strings, assignments, error handlers and statements. Everything
//! else in the analysis is language-independent.

use tree_sitter::{Language, Node};

use crate::Lang;

/// The parts of a call node.
pub(crate) struct CallParts<'t> {
    pub name: String,
    pub receiver: Option<Node<'t>>,
    /// (keyword, value) per argument.
    pub args: Vec<(Option<String>, Node<'t>)>,
    /// Rust's turbofish on the call (`query_async::<()>`).
    pub turbofish: Option<Node<'t>>,
}

/// One language's grammar facts.
pub(crate) struct Spec {
    pub lang: Lang,
    pub calls: &'static [&'static str],
    pub funcs: &'static [&'static str],
    pub strings: &'static [&'static str],
    pub idents: &'static [&'static str],
    pub assigns: &'static [&'static str],
    pub tries: &'static [&'static str],
    /// Statement-level expression wrappers: a call directly inside is discarded.
    pub expr_stmts: &'static [&'static str],
    /// Nodes whose value passes through unchanged (await, parentheses, `?`).
    pub transparent: &'static [&'static str],
    /// Conditions, comparisons and boolean operators.
    pub conditions: &'static [&'static str],
    pub returns: &'static [&'static str],
    /// Blocks whose children are statements (to tell whether code follows a statement).
    pub blocks: &'static [&'static str],
}

pub(crate) fn language(lang: Lang) -> Language {
    match lang {
        #[cfg(feature = "python")]
        Lang::Python => tree_sitter_python::LANGUAGE.into(),
        #[cfg(feature = "java")]
        Lang::Java => tree_sitter_java::LANGUAGE.into(),
        #[cfg(feature = "go")]
        Lang::Go => tree_sitter_go::LANGUAGE.into(),
        #[cfg(feature = "javascript")]
        Lang::JavaScript => tree_sitter_javascript::LANGUAGE.into(),
        #[cfg(feature = "typescript")]
        Lang::TypeScript => tree_sitter_typescript::LANGUAGE_TYPESCRIPT.into(),
        #[cfg(feature = "typescript")]
        Lang::Tsx => tree_sitter_typescript::LANGUAGE_TSX.into(),
        #[cfg(feature = "rust")]
        Lang::Rust => tree_sitter_rust::LANGUAGE.into(),
        #[cfg(feature = "php")]
        Lang::Php => tree_sitter_php::LANGUAGE_PHP.into(),
        #[cfg(feature = "ruby")]
        Lang::Ruby => tree_sitter_ruby::LANGUAGE.into(),
        #[allow(unreachable_patterns)]
        other => unreachable!("{other} is not compiled in; Lang::of_path never returns it"),
    }
}

const JS_LIKE: Spec = Spec {
    lang: Lang::JavaScript,
    calls: &["call_expression", "new_expression"],
    funcs: &[
        "function_declaration",
        "function_expression",
        "function",
        "arrow_function",
        "method_definition",
        "generator_function_declaration",
    ],
    strings: &["string", "template_string"],
    idents: &["identifier", "property_identifier", "shorthand_property_identifier"],
    assigns: &[
        "variable_declarator",
        "assignment_expression",
        "public_field_definition",
        "field_definition",
    ],
    tries: &["try_statement"],
    expr_stmts: &["expression_statement"],
    transparent: &[
        "await_expression",
        "parenthesized_expression",
        "non_null_expression",
        "as_expression",
    ],
    conditions: &[
        "binary_expression",
        "unary_expression",
        "ternary_expression",
        "if_statement",
        "while_statement",
    ],
    returns: &["return_statement"],
    blocks: &["statement_block", "program"],
};

pub(crate) fn spec(lang: Lang) -> Spec {
    match lang {
        Lang::Python => Spec {
            lang,
            calls: &["call"],
            funcs: &["function_definition", "lambda"],
            strings: &["string", "concatenated_string"],
            idents: &["identifier"],
            assigns: &["assignment"],
            tries: &["try_statement"],
            expr_stmts: &["expression_statement"],
            transparent: &["await", "parenthesized_expression"],
            conditions: &[
                "comparison_operator",
                "boolean_operator",
                "not_operator",
                "if_statement",
                "while_statement",
                "conditional_expression",
                "elif_clause",
                "assert_statement",
            ],
            returns: &["return_statement"],
            blocks: &["block", "module"],
        },
        Lang::Java => Spec {
            lang,
            calls: &["method_invocation", "object_creation_expression"],
            funcs: &["method_declaration", "constructor_declaration", "lambda_expression"],
            strings: &["string_literal"],
            idents: &["identifier"],
            assigns: &["variable_declarator", "assignment_expression"],
            tries: &["try_statement", "try_with_resources_statement"],
            expr_stmts: &["expression_statement"],
            transparent: &["parenthesized_expression", "cast_expression"],
            conditions: &[
                "binary_expression",
                "unary_expression",
                "ternary_expression",
                "if_statement",
                "while_statement",
            ],
            returns: &["return_statement"],
            blocks: &["block", "constructor_body"],
        },
        Lang::Go => Spec {
            lang,
            calls: &["call_expression"],
            funcs: &["function_declaration", "method_declaration", "func_literal"],
            strings: &["interpreted_string_literal", "raw_string_literal"],
            idents: &["identifier", "field_identifier"],
            assigns: &[
                "short_var_declaration",
                "assignment_statement",
                "var_spec",
                "const_spec",
                "keyed_element",
            ],
            tries: &[],
            expr_stmts: &["expression_statement"],
            transparent: &["parenthesized_expression", "literal_element"],
            conditions: &["binary_expression", "unary_expression", "if_statement", "for_statement"],
            returns: &["return_statement"],
            blocks: &["block", "statement_list", "source_file"],
        },
        Lang::JavaScript => JS_LIKE,
        Lang::TypeScript | Lang::Tsx => Spec { lang, ..JS_LIKE },
        Lang::Rust => Spec {
            lang,
            calls: &["call_expression"],
            funcs: &["function_item", "closure_expression"],
            strings: &["string_literal", "raw_string_literal"],
            idents: &["identifier", "field_identifier"],
            assigns: &[
                "let_declaration",
                "assignment_expression",
                "const_item",
                "static_item",
                "field_initializer",
            ],
            tries: &[],
            expr_stmts: &["expression_statement"],
            transparent: &[
                "await_expression",
                "parenthesized_expression",
                "try_expression",
                "reference_expression",
            ],
            conditions: &[
                "binary_expression",
                "unary_expression",
                "if_expression",
                "while_expression",
                "let_condition",
            ],
            returns: &["return_expression"],
            blocks: &["block", "source_file"],
        },
        Lang::Php => Spec {
            lang,
            calls: &[
                "member_call_expression",
                "nullsafe_member_call_expression",
                "scoped_call_expression",
                "function_call_expression",
                "object_creation_expression",
            ],
            funcs: &[
                "function_definition",
                "method_declaration",
                "anonymous_function",
                "arrow_function",
            ],
            strings: &["string", "encapsed_string", "heredoc", "nowdoc"],
            idents: &["name", "variable_name"],
            assigns: &["assignment_expression", "const_element", "property_element"],
            tries: &["try_statement"],
            expr_stmts: &["expression_statement"],
            transparent: &["parenthesized_expression"],
            conditions: &[
                "binary_expression",
                "unary_op_expression",
                "conditional_expression",
                "if_statement",
                "while_statement",
            ],
            returns: &["return_statement"],
            blocks: &["compound_statement", "program"],
        },
        Lang::Ruby => Spec {
            lang,
            calls: &["call"],
            funcs: &["method", "singleton_method", "block", "do_block", "lambda"],
            strings: &["string", "heredoc_body"],
            idents: &["identifier", "instance_variable", "constant"],
            assigns: &["assignment", "operator_assignment"],
            tries: &["begin", "body_statement"],
            expr_stmts: &[],
            transparent: &["parenthesized_statements"],
            conditions: &[
                "binary",
                "unary",
                "if",
                "unless",
                "while",
                "until",
                "conditional",
                "if_modifier",
                "unless_modifier",
            ],
            returns: &["return"],
            blocks: &[
                "body_statement",
                "program",
                "then",
                "else",
                "begin",
                "block_body",
                "do_block",
                "block",
            ],
        },
    }
}

fn text<'a>(n: Node<'_>, src: &'a str) -> &'a str {
    &src[n.byte_range()]
}

/// The parts of `n` if it is one of the language's call kinds.
pub(crate) fn call_parts<'t>(spec: &Spec, n: Node<'t>, src: &str) -> Option<CallParts<'t>> {
    if !spec.calls.contains(&n.kind()) {
        return None;
    }
    let named_args = |args: Option<Node<'t>>| -> Vec<(Option<String>, Node<'t>)> {
        let Some(args) = args else { return Vec::new() };
        let mut c = args.walk();
        args.named_children(&mut c)
            .filter(|a| !a.is_extra())
            .map(|a| keyword_arg(spec, a, src))
            .collect()
    };
    match spec.lang {
        Lang::Python => {
            let f = n.child_by_field_name("function")?;
            let (name, receiver) = split_member(f, "attribute", "object", "attribute", src)?;
            Some(CallParts {
                name,
                receiver,
                args: named_args(n.child_by_field_name("arguments")),
                turbofish: None,
            })
        }
        Lang::JavaScript | Lang::TypeScript | Lang::Tsx => {
            let f = n.child_by_field_name(if n.kind() == "new_expression" {
                "constructor"
            } else {
                "function"
            })?;
            let (name, receiver) = split_member(f, "member_expression", "object", "property", src)?;
            let args = n.child_by_field_name("arguments");
            // A tagged template (sql`SELECT …`): the template is the one argument.
            let args = match args {
                Some(a) if a.kind() == "template_string" => vec![(None, a)],
                a => named_args(a),
            };
            Some(CallParts { name, receiver, args, turbofish: None })
        }
        Lang::Java => {
            if n.kind() == "object_creation_expression" {
                let t = n.child_by_field_name("type")?;
                return Some(CallParts {
                    name: text(t, src).to_owned(),
                    receiver: None,
                    args: named_args(n.child_by_field_name("arguments")),
                    turbofish: None,
                });
            }
            let name = text(n.child_by_field_name("name")?, src).to_owned();
            Some(CallParts {
                name,
                receiver: n.child_by_field_name("object"),
                args: named_args(n.child_by_field_name("arguments")),
                turbofish: None,
            })
        }
        Lang::Go => {
            let f = n.child_by_field_name("function")?;
            let (name, receiver) = split_member(f, "selector_expression", "operand", "field", src)?;
            Some(CallParts {
                name,
                receiver,
                args: named_args(n.child_by_field_name("arguments")),
                turbofish: None,
            })
        }
        Lang::Rust => {
            let mut f = n.child_by_field_name("function")?;
            let mut turbofish = None;
            if f.kind() == "generic_function" {
                turbofish = f.child_by_field_name("type_arguments");
                f = f.child_by_field_name("function")?;
            }
            let (name, receiver) = match f.kind() {
                "field_expression" => (
                    text(f.child_by_field_name("field")?, src).to_owned(),
                    f.child_by_field_name("value"),
                ),
                "scoped_identifier" => (
                    text(f.child_by_field_name("name")?, src).to_owned(),
                    f.child_by_field_name("path"),
                ),
                _ => (text(f, src).to_owned(), None),
            };
            Some(CallParts {
                name,
                receiver,
                args: named_args(n.child_by_field_name("arguments")),
                turbofish,
            })
        }
        Lang::Php => {
            let (name, receiver) = match n.kind() {
                "function_call_expression" => {
                    (text(n.child_by_field_name("function")?, src).to_owned(), None)
                }
                "object_creation_expression" => {
                    let mut c = n.walk();
                    let t = n
                        .named_children(&mut c)
                        .find(|x| matches!(x.kind(), "name" | "qualified_name"))?;
                    (text(t, src).to_owned(), None)
                }
                "scoped_call_expression" => (
                    text(n.child_by_field_name("name")?, src).to_owned(),
                    n.child_by_field_name("scope"),
                ),
                _ => (
                    text(n.child_by_field_name("name")?, src).to_owned(),
                    n.child_by_field_name("object"),
                ),
            };
            let args = n.child_by_field_name("arguments").or_else(|| {
                let mut c = n.walk();
                n.named_children(&mut c).find(|x| x.kind() == "arguments")
            });
            Some(CallParts { name, receiver, args: named_args(args), turbofish: None })
        }
        Lang::Ruby => {
            let name = text(n.child_by_field_name("method")?, src).to_owned();
            Some(CallParts {
                name,
                receiver: n.child_by_field_name("receiver"),
                args: named_args(n.child_by_field_name("arguments")),
                turbofish: None,
            })
        }
    }
}

/// `obj.name` → (name, Some(obj)); a plain name → (name, None).
fn split_member<'t>(
    f: Node<'t>,
    member: &str,
    obj: &str,
    prop: &str,
    src: &str,
) -> Option<(String, Option<Node<'t>>)> {
    if f.kind() == member {
        Some((text(f.child_by_field_name(prop)?, src).to_owned(), f.child_by_field_name(obj)))
    } else {
        Some((text(f, src).to_owned(), None))
    }
}

/// A keyword argument's name and value, or (None, the node).
fn keyword_arg<'t>(spec: &Spec, a: Node<'t>, src: &str) -> (Option<String>, Node<'t>) {
    let kw = match (spec.lang, a.kind()) {
        (Lang::Python, "keyword_argument") => Some(("name", "value")),
        (Lang::Ruby, "pair") => Some(("key", "value")),
        (Lang::Php, "argument") => {
            let mut c = a.walk();
            let kids: Vec<Node<'t>> = a.named_children(&mut c).collect();
            return match (a.child_by_field_name("name"), kids.last()) {
                (Some(nm), Some(v)) => (Some(text(nm, src).to_owned()), *v),
                (None, Some(v)) => (None, *v),
                _ => (None, a),
            };
        }
        _ => None,
    };
    if let Some((k, v)) = kw
        && let (Some(kn), Some(vn)) = (a.child_by_field_name(k), a.child_by_field_name(v))
    {
        let name = text(kn, src).trim_start_matches(':').trim_end_matches(':').to_owned();
        return (Some(name), vn);
    }
    (None, a)
}

/// The (left, right) pairs of an assignment-like node.
pub(crate) fn assign_parts<'t>(spec: &Spec, n: Node<'t>) -> Vec<(Node<'t>, Node<'t>)> {
    let pair = |l: &str, r: &str| match (n.child_by_field_name(l), n.child_by_field_name(r)) {
        (Some(a), Some(b)) => vec![(a, b)],
        _ => Vec::new(),
    };
    match (spec.lang, n.kind()) {
        (Lang::Python | Lang::Ruby, _) => pair("left", "right"),
        (Lang::JavaScript | Lang::TypeScript | Lang::Tsx, "variable_declarator") => {
            pair("name", "value")
        }
        (
            Lang::JavaScript | Lang::TypeScript | Lang::Tsx,
            "public_field_definition" | "field_definition",
        ) => {
            match (
                n.child_by_field_name("name").or_else(|| n.child_by_field_name("property")),
                n.child_by_field_name("value"),
            ) {
                (Some(a), Some(b)) => vec![(a, b)],
                _ => Vec::new(),
            }
        }
        (Lang::Java, "variable_declarator") => pair("name", "value"),
        (Lang::Go, "short_var_declaration" | "assignment_statement") => {
            // `a, b := f()` binds both names to one call; `a, b := x, y` pairs them.
            let (Some(l), Some(r)) =
                (n.child_by_field_name("left"), n.child_by_field_name("right"))
            else {
                return Vec::new();
            };
            let mut c1 = l.walk();
            let mut c2 = r.walk();
            let ls: Vec<Node<'t>> = l.named_children(&mut c1).collect();
            let rs: Vec<Node<'t>> = r.named_children(&mut c2).collect();
            match (ls.len(), rs.len()) {
                (a, b) if a == b => ls.into_iter().zip(rs).collect(),
                // `v, err := f()`: the first name is the value.
                (_, 1) => vec![(ls[0], rs[0])],
                _ => Vec::new(),
            }
        }
        (Lang::Go, "keyed_element") => pair("key", "value"),
        (Lang::Rust, "field_initializer") => pair("field", "value"),
        (Lang::Go, "var_spec" | "const_spec") => {
            let mut c = n.walk();
            let names: Vec<Node<'t>> = n.children_by_field_name("name", &mut c).collect();
            let Some(v) = n.child_by_field_name("value") else { return Vec::new() };
            let mut c2 = v.walk();
            let vals: Vec<Node<'t>> = v.named_children(&mut c2).collect();
            if names.len() == vals.len() {
                names.into_iter().zip(vals).collect()
            } else {
                Vec::new()
            }
        }
        (Lang::Rust, "let_declaration") => pair("pattern", "value"),
        (Lang::Rust, "const_item" | "static_item") => pair("name", "value"),
        (Lang::Php, "const_element") => {
            let mut c = n.walk();
            let kids: Vec<Node<'t>> = n.named_children(&mut c).collect();
            match kids.as_slice() {
                [a, b] => vec![(*a, *b)],
                _ => Vec::new(),
            }
        }
        (Lang::Php, "property_element") => {
            let mut c = n.walk();
            let kids: Vec<Node<'t>> = n.named_children(&mut c).collect();
            match kids.as_slice() {
                [a, .., b] if kids.len() >= 2 => vec![(*a, *b)],
                _ => Vec::new(),
            }
        }
        (_, _) => pair("left", "right"),
    }
}

/// The name of a function node, and its parameter names.
pub(crate) fn func_parts(spec: &Spec, n: Node<'_>, src: &str) -> (String, Vec<String>) {
    let name = n.child_by_field_name("name").map(|x| text(x, src).to_owned()).unwrap_or_default();
    let params = n
        .child_by_field_name("parameters")
        .or_else(|| n.child_by_field_name("parameter"))
        .map(|p| {
            let mut out = Vec::new();
            collect_param_names(spec, p, src, &mut out);
            out
        })
        .unwrap_or_default();
    (name, params)
}

fn collect_param_names(spec: &Spec, p: Node<'_>, src: &str, out: &mut Vec<String>) {
    if spec.idents.contains(&p.kind()) && p.kind() != "constant" {
        out.push(text(p, src).trim_start_matches('$').to_owned());
        return;
    }
    // Types and default values are not parameter names.
    let mut c = p.walk();
    for (i, ch) in p.named_children(&mut c).enumerate() {
        let field = p.field_name_for_named_child(i as u32);
        if matches!(field, Some("type" | "value" | "default_value" | "return_type")) {
            continue;
        }
        if ch.kind().contains("type") && !ch.kind().contains("parameter") {
            continue;
        }
        collect_param_names(spec, ch, src, out);
    }
}
