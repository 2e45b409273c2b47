//! SARIF 2.1.0, as GitHub code scanning and other SARIF viewers take it.

use std::collections::HashMap;
use std::path::{Component, Path};

use serde_json::{Value, json};

use super::{Lines, explain, read_source, to_json};
use crate::{Finding, Note, NoteKind, Report, Rule, Severity};

const SCHEMA: &str = "https://json.schemastore.org/sarif-2.1.0.json";
const INFORMATION_URI: &str = "https://docs.rs/leasehold-review";
/// The key of each result's `partialFingerprints`; `/v1` changes if the hash ever does.
pub(super) const FINGERPRINT: &str = "leaseholdFingerprint/v1";

/// The report as SARIF 2.1.0 (one run, `tool.driver` "leasehold-review" with every rule and
/// its explanation page), reading each finding's file again for its fingerprint. See
/// [`sarif_with`].
pub fn sarif(report: &Report) -> String {
    sarif_with(report, &read_source)
}

/// The report as SARIF 2.1.0, with `sources` returning a file's text.
///
/// Locations are URIs relative to `%SRCROOT%` (the directory the paths are relative to: run
/// the review from the repository's root for GitHub), with forward slashes and
/// percent-encoding; an absolute path becomes a `file://` URI. Columns count Unicode code
/// points (`columnKind` says so). Each result has a `partialFingerprints` entry
/// `leaseholdFingerprint/v1`: a hash of the rule, the path and the trimmed text of the
/// finding's first line, then `:N` for the Nth such finding in the file, so a finding keeps
/// its identity while lines above it are added or removed. Notes are the invocation's
/// `toolExecutionNotifications`.
pub fn sarif_with(report: &Report, sources: &dyn Fn(&Path) -> Option<String>) -> String {
    let rules: Vec<Value> = Rule::ALL.iter().map(|&r| rule(r)).collect();
    let mut lines = Lines::new(sources);
    let mut seen: HashMap<(String, u64), usize> = HashMap::new();
    let results: Vec<Value> = report
        .findings
        .iter()
        .map(|f| {
            let uri = uri(&f.path);
            let text = lines.line(&f.path, f.span.start_line).unwrap_or("").trim().to_owned();
            let hash = fnv1a(&[f.rule.id(), &uri, &text]);
            let n = seen.entry((uri.clone(), hash)).or_insert(0);
            *n += 1;
            result(f, uri, format!("{hash:016x}:{n}"))
        })
        .collect();
    let notifications: Vec<Value> = report.notes.iter().map(notification).collect();
    let doc = json!({
        "$schema": SCHEMA,
        "version": "2.1.0",
        "runs": [{
            "tool": {
                "driver": {
                    "name": "leasehold-review",
                    "informationUri": INFORMATION_URI,
                    "version": env!("CARGO_PKG_VERSION"),
                    "semanticVersion": env!("CARGO_PKG_VERSION"),
                    "rules": rules,
                }
            },
            "invocations": [{
                "executionSuccessful": true,
                "toolExecutionNotifications": notifications,
            }],
            "columnKind": "unicodeCodePoints",
            "results": results,
        }]
    });
    to_json(&doc)
}

fn level(s: Severity) -> &'static str {
    match s {
        Severity::Error => "error",
        Severity::Warning => "warning",
    }
}

fn rule(r: Rule) -> Value {
    let page = explain(r);
    json!({
        "id": r.id(),
        "name": camel(r.id()),
        "shortDescription": { "text": r.summary() },
        "fullDescription": { "text": super::explain::first_paragraph(page) },
        "help": { "text": page, "markdown": page },
        "defaultConfiguration": { "level": level(r.severity()) },
        "properties": {
            "tags": ["concurrency", "distributed-lock"],
            "problem.severity": level(r.severity()),
        },
    })
}

fn result(f: &Finding, uri: String, fingerprint: String) -> Value {
    let index = Rule::ALL.iter().position(|r| *r == f.rule).unwrap_or(0);
    let mut text = f.message.clone();
    if !f.fix.is_empty() {
        text = format!("{text} Fix: {}", f.fix);
    }
    let s = f.span;
    let start_line = s.start_line.max(1);
    let start_col = s.start_col.max(1);
    let end_line = s.end_line.max(start_line);
    let end_col = if end_line == start_line { s.end_col.max(start_col) } else { s.end_col.max(1) };
    json!({
        "ruleId": f.rule.id(),
        "ruleIndex": index,
        "level": level(f.severity),
        "message": { "text": text },
        "locations": [{
            "physicalLocation": {
                "artifactLocation": artifact(&f.path, uri),
                "region": {
                    "startLine": start_line,
                    "startColumn": start_col,
                    "endLine": end_line,
                    "endColumn": end_col,
                },
            }
        }],
        "partialFingerprints": { FINGERPRINT: fingerprint },
        "properties": { "leasehold": f.leasehold },
    })
}

fn notification(n: &Note) -> Value {
    let kind = serde_json::to_value(n.kind).unwrap_or(Value::Null);
    let level = match n.kind {
        NoteKind::BadSuppression | NoteKind::ParseError | NoteKind::Unreadable => "warning",
        NoteKind::TooLarge | NoteKind::Binary | NoteKind::Generated => "note",
    };
    json!({
        "descriptor": { "id": kind },
        "level": level,
        "message": { "text": format!("{}: {}", n.path.display(), n.message) },
        "locations": [{
            "physicalLocation": { "artifactLocation": artifact(&n.path, uri(&n.path)) }
        }],
    })
}

fn artifact(path: &Path, uri: String) -> Value {
    if path.is_absolute() {
        json!({ "uri": uri })
    } else {
        json!({ "uri": uri, "uriBaseId": "%SRCROOT%" })
    }
}

/// `path` as a URI reference: relative ones with `/` between segments, absolute ones as
/// `file:///…`; every byte but the unreserved characters percent-encoded.
pub(super) fn uri(path: &Path) -> String {
    let mut segments: Vec<String> = Vec::new();
    for c in path.components() {
        match c {
            Component::Normal(s) => segments.push(encode(s.as_encoded_bytes())),
            Component::ParentDir => segments.push("..".into()),
            Component::CurDir | Component::RootDir | Component::Prefix(_) => {}
        }
    }
    let joined = segments.join("/");
    if path.is_absolute() { format!("file:///{joined}") } else { joined }
}

fn encode(bytes: &[u8]) -> String {
    let mut s = String::with_capacity(bytes.len());
    for &b in bytes {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            s.push(b as char);
        } else {
            s.push_str(&format!("%{b:02X}"));
        }
    }
    s
}

/// `nx-without-expiry` as `NxWithoutExpiry`.
pub(super) fn camel(id: &str) -> String {
    id.split('-')
        .map(|w| {
            let mut c = w.chars();
            c.next().map(|f| f.to_ascii_uppercase().to_string() + c.as_str()).unwrap_or_default()
        })
        .collect()
}

/// 64-bit FNV-1a over the parts, each followed by a NUL: stable across builds and platforms
/// (unlike `std`'s hashers), which is all a fingerprint needs.
pub(super) fn fnv1a(parts: &[&str]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for p in parts {
        for &b in p.as_bytes().iter().chain(&[0u8]) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    h
}
