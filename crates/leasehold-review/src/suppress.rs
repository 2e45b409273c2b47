//! Inline suppression comments: `leasehold: ignore[rule-id] reason`.
//!
//! A comment holding `leasehold: ignore[nx-without-expiry] the key is deleted by the
//! janitor` (or `ignore[a, b] …` for several rules) suppresses those rules' findings that
//! start on its own line, and, when it stands on a line of its own (nothing but the comment),
//! on the line directly below. The reason is required: a suppression without one, or naming a
//! rule that does not exist, suppresses nothing and becomes a [`NoteKind::BadSuppression`]
//! note naming its line. Comments are found by their marker alone, in any language: the text
//! `leasehold: ignore[` appears in comments, not in code.

use std::collections::HashMap;
use std::path::Path;

use crate::{FileReview, Note, NoteKind, Rule};

/// What the marker starts with; `ignore[` follows, after optional spaces.
const MARKER: &str = "leasehold:";
const IGNORE: &str = "ignore[";

/// One well-formed suppression.
#[derive(Debug, PartialEq, Eq)]
struct Suppression {
    /// 1-based line of the comment.
    line: usize,
    /// Whether the comment is alone on its line (so it covers the next line too).
    own_line: bool,
    rules: Vec<Rule>,
}

impl Suppression {
    fn covers(&self, line: usize, rule: Rule) -> bool {
        (line == self.line || (self.own_line && line == self.line + 1))
            && self.rules.contains(&rule)
    }
}

/// Drops the findings a suppression comment covers, and notes malformed comments. Lock sites
/// keep the rules of their suppressed findings: the inventory shows what the code does.
pub(crate) fn apply(path: &Path, src: &str, out: &mut FileReview) {
    if !src.contains(MARKER) {
        return;
    }
    // Rust's test module (by convention last in the file) holds suppressions as test data;
    // the analysis reports nothing there either.
    let reviewed = match (path.extension().and_then(|e| e.to_str()), src.find("#[cfg(test)]")) {
        (Some("rs"), Some(at)) => &src[..at],
        _ => src,
    };
    let (good, bad) = parse(reviewed);
    // By the lines each covers, so a finding asks only its own line's suppressions.
    let mut by_line: HashMap<usize, Vec<&Suppression>> = HashMap::new();
    for s in &good {
        by_line.entry(s.line).or_default().push(s);
        if s.own_line {
            by_line.entry(s.line + 1).or_default().push(s);
        }
    }
    out.findings.retain(|f| {
        let line = f.span.start_line;
        !by_line.get(&line).is_some_and(|v| v.iter().any(|s| s.covers(line, f.rule)))
    });
    out.notes.extend(bad.into_iter().map(|message| Note {
        path: path.to_owned(),
        kind: NoteKind::BadSuppression,
        message,
    }));
}

/// The suppressions in `src`, and a message for each malformed one.
fn parse(src: &str) -> (Vec<Suppression>, Vec<String>) {
    let (mut good, mut bad) = (Vec::new(), Vec::new());
    for (i, text) in src.lines().enumerate() {
        let line = i + 1;
        let mut starts: Vec<usize> = Vec::new();
        for (at, _) in text.match_indices(MARKER) {
            // Quoted, in code or in prose (`leasehold: ignore[…]` in a doc comment or a
            // string literal), it is an example, not a suppression.
            let before = &text[..at];
            if before.matches('`').count() % 2 == 1 || before.matches('"').count() % 2 == 1 {
                continue;
            }
            let after = text[at + MARKER.len()..].trim_start();
            if after.starts_with(IGNORE) {
                starts.push(at);
            }
        }
        let Some(&first) = starts.first() else { continue };
        let own_line = is_comment_start(&text[..first + MARKER.len()]);
        for (k, &at) in starts.iter().enumerate() {
            let end = starts.get(k + 1).copied().unwrap_or(text.len());
            match one(&text[at..end]) {
                Ok(rules) => good.push(Suppression { line, own_line, rules }),
                Err(why) => bad.push(format!("line {line}: {why}; it suppresses nothing")),
            }
        }
    }
    (good, bad)
}

/// Whether a line whose marker ends `prefix` holds nothing but the comment before it.
fn is_comment_start(prefix: &str) -> bool {
    let t = prefix.trim_start();
    ["#", "//", "/*", "*", "--", "<!--", "{#"].iter().any(|c| t.starts_with(c))
}

/// The rules of one suppression, from its marker to the end of its comment.
fn one(text: &str) -> Result<Vec<Rule>, String> {
    let body = text[MARKER.len()..].trim_start();
    let body = &body[IGNORE.len()..];
    let Some(close) = body.find(']') else {
        return Err("`leasehold: ignore[` without its closing `]`".into());
    };
    let ids: Vec<&str> =
        body[..close].split(',').map(str::trim).filter(|s| !s.is_empty()).collect();
    if ids.is_empty() {
        return Err("`leasehold: ignore[]` names no rule".into());
    }
    let mut rules = Vec::new();
    let mut unknown = Vec::new();
    for id in ids {
        match id.parse::<Rule>() {
            Ok(r) => rules.push(r),
            Err(_) => unknown.push(format!("{id:?}")),
        }
    }
    if !unknown.is_empty() {
        let all: Vec<&str> = Rule::ALL.iter().map(|r| r.id()).collect();
        return Err(format!(
            "unknown rule {} in a suppression (rules: {})",
            unknown.join(", "),
            all.join(", ")
        ));
    }
    if !reason(&body[close + 1..]) {
        let ids: Vec<&str> = rules.iter().map(|r| r.id()).collect();
        return Err(format!(
            "the suppression of {} gives no reason (write `leasehold: ignore[{}] why it is safe`)",
            ids.join(", "),
            ids.join(", ")
        ));
    }
    Ok(rules)
}

/// Whether the text after `]` says something, once comment closers and separators are gone.
fn reason(after: &str) -> bool {
    let mut t = after.trim();
    for closer in ["*/", "-->", "#}", "?>", "%>"] {
        t = t.strip_suffix(closer).unwrap_or(t).trim_end();
    }
    t.chars().any(char::is_alphanumeric)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Finding, Lang, Span};

    fn finding(rule: Rule, line: usize) -> Finding {
        Finding {
            rule,
            severity: rule.severity(),
            path: "a.py".into(),
            lang: Lang::Python,
            span: Span {
                start_line: line,
                start_col: 1,
                end_line: line,
                end_col: 5,
                start_byte: 0,
                end_byte: 0,
            },
            message: String::new(),
            fix: String::new(),
            leasehold: String::new(),
        }
    }

    /// The (rule, line) of the findings left, and the notes, after suppressing in `src`.
    fn run(src: &str, found: &[(Rule, usize)]) -> (Vec<(Rule, usize)>, Vec<String>) {
        let mut out = FileReview {
            findings: found.iter().map(|&(r, l)| finding(r, l)).collect(),
            ..FileReview::default()
        };
        apply(Path::new("a.py"), src, &mut out);
        assert!(out.notes.iter().all(|n| n.kind == NoteKind::BadSuppression));
        let left = out.findings.iter().map(|f| (f.rule, f.span.start_line)).collect();
        (left, out.notes.into_iter().map(|n| n.message).collect())
    }

    const DEL: Rule = Rule::ReleaseWithoutOwnerCheck;
    const NX: Rule = Rule::NxWithoutExpiry;

    #[test]
    fn same_line_and_the_comment_line_above() {
        let src = "\
r.delete(k)  # leasehold: ignore[release-without-owner-check] the janitor owns this key
# leasehold: ignore[nx-without-expiry, release-without-owner-check] test fixture only
r.setnx(k, 1); r.delete(k)
r.delete(k)
";
        let (left, notes) = run(src, &[(DEL, 1), (NX, 3), (DEL, 3), (DEL, 4)]);
        assert_eq!(left, [(DEL, 4)]);
        assert!(notes.is_empty(), "{notes:?}");
    }

    #[test]
    fn only_the_rules_named_and_only_adjacent_lines() {
        let src = "\
r.delete(k)  // leasehold: ignore[nx-without-expiry] wrong rule for this line

// leasehold: ignore[release-without-owner-check] a blank line parts it from its code

r.delete(k)
x = 1  # leasehold: ignore[release-without-owner-check] a trailing comment covers its own line only
r.delete(k)
";
        let (left, notes) = run(src, &[(DEL, 1), (DEL, 5), (DEL, 7)]);
        assert_eq!(left, [(DEL, 1), (DEL, 5), (DEL, 7)]);
        assert!(notes.is_empty(), "{notes:?}");
    }

    #[test]
    fn block_comments_and_spacing() {
        let src = "\
/* leasehold:ignore[ release-without-owner-check ] owner checked by the caller */
del(k)
del(k) /* leasehold: ignore[release-without-owner-check] */
";
        let (left, notes) = run(src, &[(DEL, 2), (DEL, 3)]);
        assert_eq!(left, [(DEL, 3)]);
        assert_eq!(notes.len(), 1);
        assert!(
            notes[0].starts_with(
                "line 3: the suppression of release-without-owner-check gives no reason"
            )
        );
    }

    #[test]
    fn malformed_suppressions_suppress_nothing_and_say_why() {
        let src = "\
r.delete(k)  # leasehold: ignore[release-without-owner-check]
r.delete(k)  # leasehold: ignore[release-without-owner-check, nx] the rest is fine
r.delete(k)  # leasehold: ignore[] because
r.delete(k)  # leasehold: ignore[release-without-owner-check because
r.delete(k)  # leasehold: ignore[release-without-owner-check] -- 
";
        let found: Vec<(Rule, usize)> = (1..=5).map(|l| (DEL, l)).collect();
        let (left, notes) = run(src, &found);
        assert_eq!(left, found);
        assert_eq!(notes.len(), 5, "{notes:?}");
        assert!(
            notes[0].starts_with(
                "line 1: the suppression of release-without-owner-check gives no reason"
            )
        );
        assert!(notes[1].starts_with(
            "line 2: unknown rule \"nx\" in a suppression (rules: nx-without-expiry,"
        ));
        assert!(notes[2].starts_with("line 3: `leasehold: ignore[]` names no rule"));
        assert!(notes[3].starts_with("line 4: `leasehold: ignore[` without its closing `]`"));
        assert!(notes[4].starts_with("line 5:") && notes[4].ends_with("it suppresses nothing"));
    }

    #[test]
    fn two_suppressions_on_one_line() {
        let src = "f()  # leasehold: ignore[nx-without-expiry] fixture leasehold: ignore[fail-open] logged\n";
        let (left, notes) = run(src, &[(NX, 1), (Rule::FailOpen, 1), (DEL, 1)]);
        assert_eq!(left, [(DEL, 1)]);
        assert!(notes.is_empty(), "{notes:?}");
        // Text without the marker is left alone.
        let (left, _) = run("leasehold: see ignore[x]\n", &[(DEL, 1)]);
        assert_eq!(left, [(DEL, 1)]);
    }
}
