//! Lua scripts held in string literals, parsed with tree-sitter-lua: which keys a script
//! deletes, extends or sets, and whether it compares the caller's value first.

use tree_sitter::{Node, Parser};

/// What a script does to keys, as far as locks care.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Script {
    /// Deletes a key (DEL/UNLINK) with no owner comparison before it.
    pub unchecked_del: bool,
    /// Extends a key's expiry (EXPIRE/PEXPIRE/…/SET XX) with no owner comparison before it.
    pub unchecked_renew: bool,
    /// Deletes a key after comparing it with an ARGV value.
    pub checked_del: bool,
    /// Extends after comparing.
    pub checked_renew: bool,
    /// Takes a lock: SET … NX.
    pub acquires: bool,
}

/// Whether a string looks like a Redis script at all (cheap, before parsing).
pub(crate) fn looks_like_script(s: &str) -> bool {
    s.contains("redis.call") || s.contains("redis.pcall") || s.contains("server.call")
}

pub(crate) fn analyze(src: &str) -> Option<Script> {
    let mut p = Parser::new();
    p.set_language(&tree_sitter_lua::LANGUAGE.into()).ok()?;
    let tree = p.parse(src, None)?;
    let root = tree.root_node();
    let text = |n: Node<'_>| src.get(n.byte_range()).unwrap_or("");

    // Locals assigned from ARGV or from a redis.call: comparisons may go through them.
    let mut argv_names: Vec<String> = Vec::new();
    let mut call_names: Vec<String> = Vec::new();
    let mut conditions: Vec<Node<'_>> = Vec::new();
    let mut calls: Vec<Node<'_>> = Vec::new();
    let mut stack = vec![root];
    while let Some(n) = stack.pop() {
        match n.kind() {
            "variable_declaration" | "assignment_statement" => {
                let t = text(n);
                if let Some((lhs, rhs)) = t.split_once('=') {
                    let name = lhs.trim().trim_start_matches("local").trim().to_owned();
                    if rhs.contains("ARGV") {
                        argv_names.push(name.clone());
                    }
                    if rhs.contains("redis.call") || rhs.contains("redis.pcall") {
                        call_names.push(name);
                    }
                }
            }
            "if_statement" | "elseif_statement" | "while_statement" => {
                if let Some(c) = n.child_by_field_name("condition") {
                    conditions.push(c);
                }
            }
            "function_call" => {
                let name = n.child_by_field_name("name").map(text).unwrap_or("");
                if matches!(name, "redis.call" | "redis.pcall" | "server.call" | "server.pcall") {
                    calls.push(n);
                }
            }
            _ => {}
        }
        let mut c = n.walk();
        stack.extend(n.named_children(&mut c));
    }
    let mentions =
        |t: &str, names: &[String]| names.iter().any(|n| !n.is_empty() && has_word(t, n));
    let owner_checks: Vec<&Node<'_>> = conditions
        .iter()
        .filter(|c| {
            let t = text(**c);
            let argv = t.contains("ARGV") || mentions(t, &argv_names);
            let stored =
                t.contains("redis.call") || t.contains("redis.pcall") || mentions(t, &call_names);
            argv && stored
        })
        .collect();
    let mut out = Script::default();
    for call in calls {
        let Some(args) = call.child_by_field_name("arguments") else { continue };
        let mut c = args.walk();
        let argv: Vec<Node<'_>> = args.named_children(&mut c).collect();
        let Some(first) = argv.first() else { continue };
        let cmd = text(*first).trim_matches(['"', '\'']).to_ascii_lowercase();
        let rest: String =
            argv[1..].iter().map(|a| text(*a).to_ascii_lowercase()).collect::<Vec<_>>().join(" ");
        let checked = owner_checks.iter().any(|c| c.start_byte() < call.start_byte());
        match cmd.as_str() {
            "del" | "unlink" => {
                if checked {
                    out.checked_del = true
                } else {
                    out.unchecked_del = true
                }
            }
            "expire" | "pexpire" | "expireat" | "pexpireat" => {
                if checked {
                    out.checked_renew = true
                } else {
                    out.unchecked_renew = true
                }
            }
            "set" if rest.contains("'nx'") || rest.contains("\"nx\"") => out.acquires = true,
            "set" if rest.contains("'xx'") || rest.contains("\"xx\"") => {
                if checked {
                    out.checked_renew = true
                } else {
                    out.unchecked_renew = true
                }
            }
            _ => {}
        }
    }
    Some(out)
}

fn has_word(t: &str, w: &str) -> bool {
    t.match_indices(w).any(|(i, _)| {
        let before = t[..i].chars().next_back();
        let after = t[i + w.len()..].chars().next();
        !before.is_some_and(|c| c.is_alphanumeric() || c == '_')
            && !after.is_some_and(|c| c.is_alphanumeric() || c == '_')
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compare_then_delete_is_checked_and_bare_delete_is_not() {
        let good = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";
        let s = analyze(good).unwrap();
        assert!(s.checked_del && !s.unchecked_del);
        let bad = "return redis.call('del', KEYS[1])";
        assert!(analyze(bad).unwrap().unchecked_del);
        let via_local = "local v = redis.call('GET', KEYS[1])\nlocal me = ARGV[1]\nif v ~= me then return 0 end\nreturn redis.call('PEXPIRE', KEYS[1], ARGV[2])";
        let s = analyze(via_local).unwrap();
        assert!(s.checked_renew && !s.unchecked_renew, "{s:?}");
        let unrelated_if =
            "if tonumber(ARGV[2]) > 0 then redis.call('pexpire', KEYS[1], ARGV[2]) end";
        assert!(analyze(unrelated_if).unwrap().unchecked_renew);
    }

    #[test]
    fn broken_scripts_do_not_panic() {
        for s in ["if then", "redis.call(", "", "\u{0}"] {
            let _ = analyze(s);
        }
    }
}
