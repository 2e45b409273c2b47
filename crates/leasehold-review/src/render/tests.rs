use std::path::{Path, PathBuf};

use serde_json::Value;

use super::*;
use crate::{Checked, Finding, Lang, LockSite, Note, NoteKind, Rule, Span, Store};

pub(crate) fn span(line: usize, col: usize, end_line: usize, end_col: usize) -> Span {
    Span { start_line: line, start_col: col, end_line, end_col, start_byte: 0, end_byte: 0 }
}

fn finding(rule: Rule, path: &str, span: Span) -> Finding {
    Finding {
        rule,
        severity: rule.severity(),
        path: path.into(),
        lang: Lang::Python,
        span,
        message: format!("{} here", rule.id()),
        fix: "do the right thing".into(),
        leasehold: "Locker::acquire".into(),
    }
}

const JOB: &str =
    "import redis\nr = redis.Redis()\nr.setnx('lock:job', '1')\n\tr.delete('lock:job')\n";

fn sources(path: &Path) -> Option<String> {
    (path == Path::new("job.py")).then(|| JOB.to_owned())
}

fn report() -> Report {
    Report {
        findings: vec![
            finding(Rule::NxWithoutExpiry, "job.py", span(3, 1, 3, 25)),
            finding(Rule::ReleaseWithoutOwnerCheck, "job.py", span(4, 2, 4, 21)),
            finding(Rule::FailOpen, "gone.py", span(9, 1, 9, 4)),
        ],
        inventory: vec![LockSite {
            path: "job.py".into(),
            lang: Lang::Python,
            span: span(3, 1, 3, 25),
            store: Store::Redis,
            api: "redis-py setnx".into(),
            key: "'lock:job'".into(),
            expiry: "none".into(),
            owner: "constant \"1\"".into(),
            release: Checked::Unchecked,
            renew: Checked::None,
            fence: "none".into(),
            findings: vec![Rule::NxWithoutExpiry, Rule::ReleaseWithoutOwnerCheck],
        }],
        notes: vec![Note {
            path: "app.min.js".into(),
            kind: NoteKind::Generated,
            message: "minified (lines average 4000 bytes)".into(),
        }],
        stats: crate::Stats { files: 3, parsed: 2, lines: 12, bytes: 300 },
    }
}

#[test]
fn text_like_rustc() {
    let out = text(&report(), &sources, false);
    let expected = "\
error[nx-without-expiry]: nx-without-expiry here
 --> job.py:3:1
  |
3 | r.setnx('lock:job', '1')
  | ^^^^^^^^^^^^^^^^^^^^^^^^
  = fix: do the right thing
  = leasehold: Locker::acquire

error[release-without-owner-check]: release-without-owner-check here
 --> job.py:4:2
  |
4 |     r.delete('lock:job')
  |     ^^^^^^^^^^^^^^^^^^^
  = fix: do the right thing
  = leasehold: Locker::acquire

warning[fail-open]: fail-open here
 --> gone.py:9:1
  = fix: do the right thing
  = leasehold: Locker::acquire

note: app.min.js: minified (lines average 4000 bytes)

2 errors, 1 warning in 3 files (12 lines)
";
    assert_eq!(out, expected, "\n{out}");
    let coloured = text(&report(), &sources, true);
    assert!(coloured.contains("\x1b[1;31merror[nx-without-expiry]\x1b[0m"), "{coloured}");
    assert!(coloured.contains("\x1b[1;33mwarning[fail-open]\x1b[0m"));
    let empty = Report {
        stats: crate::Stats { files: 1, lines: 1, ..Default::default() },
        ..Default::default()
    };
    assert_eq!(text(&empty, &sources, false), "0 errors, 0 warnings in 1 file (1 line)\n");
}

#[test]
fn multi_line_spans_are_underlined_line_by_line_and_long_ones_elided() {
    let src: String = (1..=20).map(|i| format!("    line{i}\n")).collect();
    let long = finding(Rule::UnfencedEffect, "x.py", span(2, 7, 12, 6));
    let r = Report { findings: vec![long], ..Default::default() };
    let out = text(&r, &|_: &Path| Some(src.clone()), false);
    let expected = "\
warning[unfenced-effect]: unfenced-effect here
  --> x.py:2:7
   |
 2 |     line2
   |       ^^^
 3 |     line3
   |     ^^^^^
 4 |     line4
   |     ^^^^^
...
11 |     line11
   |     ^^^^^^
12 |     line12
   |     ^
";
    assert!(out.starts_with(expected), "\n{out}");
    // A span ending at column 1 of a line ends on the line before; a zero-width one gets a caret.
    let r = Report {
        findings: vec![
            finding(Rule::UnfencedEffect, "x.py", span(1, 5, 2, 1)),
            finding(Rule::UnfencedEffect, "x.py", span(3, 40, 3, 40)),
        ],
        ..Default::default()
    };
    let out = text(&r, &|_: &Path| Some(src.clone()), false);
    assert!(out.contains("1 |     line1\n  |     ^^^^^\n  = fix"), "\n{out}");
    assert!(out.contains("3 |     line3\n  |          ^\n"), "\n{out}");
}

#[test]
fn json_has_a_version_and_the_report() {
    let v: Value = serde_json::from_str(&json(&report())).unwrap();
    assert_eq!(v["version"], 1);
    assert_eq!(v["findings"][0]["rule"], "nx-without-expiry");
    assert_eq!(v["findings"][0]["severity"], "error");
    assert_eq!(v["findings"][0]["span"]["start_line"], 3);
    assert_eq!(v["inventory"][0]["release"], "unchecked");
    assert_eq!(v["notes"][0]["kind"], "generated");
    assert_eq!(v["stats"]["files"], 3);
    let inv: Value = serde_json::from_str(&inventory_json(&report())).unwrap();
    assert_eq!(inv["version"], 1);
    assert_eq!(inv["inventory"][0]["store"], "redis");
    assert_eq!(inv["inventory"][0]["findings"][1], "release-without-owner-check");
    assert!(inv.get("findings").is_none());
}

#[test]
fn sarif_shape() {
    let v: Value = serde_json::from_str(&sarif_with(&report(), &sources)).unwrap();
    assert_eq!(v["version"], "2.1.0");
    assert_eq!(v["$schema"], "https://json.schemastore.org/sarif-2.1.0.json");
    let run = &v["runs"][0];
    let driver = &run["tool"]["driver"];
    assert_eq!(driver["name"], "leasehold-review");
    assert_eq!(driver["version"], env!("CARGO_PKG_VERSION"));
    let rules = driver["rules"].as_array().unwrap();
    assert_eq!(rules.len(), Rule::ALL.len());
    for (i, r) in Rule::ALL.iter().enumerate() {
        assert_eq!(rules[i]["id"], r.id());
        assert_eq!(rules[i]["help"]["markdown"], explain(*r));
        assert_eq!(rules[i]["defaultConfiguration"]["level"], r.severity().to_string());
        assert_eq!(rules[i]["properties"]["problem.severity"], r.severity().to_string());
        // GitHub code scanning takes descriptions of at most 1,024 characters.
        let full = rules[i]["fullDescription"]["text"].as_str().unwrap();
        assert!(!full.is_empty() && full.len() <= 1024, "{r}: {full}");
    }
    assert_eq!(rules[1]["name"], "ReleaseWithoutOwnerCheck");
    let res = run["results"].as_array().unwrap();
    assert_eq!(res.len(), 3);
    // In the report's order.
    assert_eq!(res[0]["ruleId"], "nx-without-expiry");
    assert_eq!(res[0]["ruleIndex"], 0);
    assert_eq!(res[0]["level"], "error");
    assert_eq!(res[0]["message"]["text"], "nx-without-expiry here Fix: do the right thing");
    assert_eq!(res[0]["properties"]["leasehold"], "Locker::acquire");
    assert_eq!(res[1]["ruleIndex"], 1);
    let loc = &res[0]["locations"][0]["physicalLocation"];
    assert_eq!(loc["artifactLocation"]["uri"], "job.py");
    assert_eq!(loc["artifactLocation"]["uriBaseId"], "%SRCROOT%");
    assert_eq!(loc["region"]["startLine"], 3);
    assert_eq!(loc["region"]["endColumn"], 25);
    assert_eq!(res[2]["level"], "warning");
    let note = &run["invocations"][0]["toolExecutionNotifications"][0];
    assert_eq!(note["descriptor"]["id"], "generated");
}

#[test]
fn fingerprints_survive_moved_lines_and_tell_twins_apart() {
    let fp = |src: &str, lines: &[usize]| -> Vec<String> {
        let r = Report {
            findings: lines
                .iter()
                .map(|&l| finding(Rule::ReleaseWithoutOwnerCheck, "a.py", span(l, 1, l, 5)))
                .collect(),
            ..Default::default()
        };
        let src = src.to_owned();
        let v: Value =
            serde_json::from_str(&sarif_with(&r, &|_: &Path| Some(src.clone()))).unwrap();
        v["runs"][0]["results"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                r["partialFingerprints"]["leaseholdFingerprint/v1"].as_str().unwrap().to_owned()
            })
            .collect()
    };
    let before = fp("r.delete(k)\nx = 1\n  r.delete(k)\n", &[1, 3]);
    let after = fp("import os\n\nr.delete(k)\nx = 1\nr.delete(k)\n", &[3, 5]);
    assert_eq!(before, after);
    assert!(before[0].ends_with(":1") && before[1].ends_with(":2"), "{before:?}");
    assert_eq!(before[0].len(), 18);
    let other = fp("r.delete(other)\n", &[1]);
    assert_ne!(other[0], before[0]);
}

#[test]
fn uris() {
    assert_eq!(sarif::uri(Path::new("src/a b/x#1.py")), "src/a%20b/x%231.py");
    assert_eq!(sarif::uri(Path::new("./src/é.py")), "src/%C3%A9.py");
    assert_eq!(sarif::uri(Path::new("/abs/x.py")), "file:///abs/x.py");
    assert_eq!(sarif::uri(Path::new("../up/x.py")), "../up/x.py");
    assert_eq!(sarif::camel("nx-without-expiry"), "NxWithoutExpiry");
}

#[test]
fn inventory_table() {
    let mut r = report();
    let mut wide = r.inventory[0].clone();
    wide.path = PathBuf::from(format!("{}/deep/file.py", "very-long-directory".repeat(3)));
    wide.key = "f\"lock:{tenant}:{\n    job_id}\"".into();
    wide.api = "a-very-long-client-api-name-that-goes-on".into();
    wide.findings.clear();
    r.inventory.push(wide);
    let out = inventory_text(&r);
    let lines: Vec<&str> = out.lines().collect();
    assert!(lines[0].starts_with("location "), "{out}");
    assert!(lines[0].ends_with("  findings"), "{out}");
    assert!(lines[1].starts_with("job.py:3 "), "{out}");
    assert!(lines[1].ends_with("nx-without-expiry,release-without-owner-check"), "{out}");
    assert!(lines[2].starts_with("…") && lines[2].contains("/deep/file.py:3 "), "{out}");
    assert!(lines[2].contains("a-very-long-client-api-name…"), "{out}");
    assert!(lines[2].contains("f\"lock:{tenant}:{ job_id}\""), "{out}");
    assert!(lines[2].ends_with("  -"), "{out}");
    // Columns line up: every row's store column starts where the header's does.
    let at = lines[0].find("store").unwrap();
    assert_eq!(lines[1].chars().position(|c| c == 'r'), Some(at));
    assert_eq!(lines[2].chars().skip(at).take(5).collect::<String>(), "redis");
    assert_eq!(lines[4], "2 lock sites in 2 files (3 reviewed)");
    assert_eq!(inventory_text(&Report::default()), "0 lock sites in 0 files (0 reviewed)\n");
}

#[test]
fn every_rule_has_a_full_page() {
    for &r in Rule::ALL {
        let page = explain(r);
        assert!(page.starts_with(&format!("# {}: ", r.id())), "{r}");
        for section in [
            "## Why it breaks",
            "## Bad",
            "## Fixed",
            "## What to use instead",
            "## leasehold's way",
        ] {
            assert!(page.contains(section), "{r}: {section}");
        }
        assert!(page.contains("```python"), "{r}: no Python example");
        let fences = page.matches("```").count();
        assert!(fences >= 10 && fences.is_multiple_of(2), "{r}: {fences} code fences");
        let langs = ["```go", "```java", "```javascript", "```ruby", "```php", "```typescript"];
        assert!(langs.iter().any(|l| page.contains(l)), "{r}: no second language");
        assert!(page.contains("```rust"), "{r}: no leasehold example");
        let sev = format!("Severity: **{}**", r.severity());
        assert!(page.contains(&sev), "{r}: {sev}");
        assert!(explain::first_paragraph(page).len() > 40, "{r}");
    }
}
