//! The corpus is the specification: every bad file gets exactly the findings its
//! `expect: rule-id` comments name (rule and line), and every fixed file gets none.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use leasehold_review::{Lang, Options, Rule, review_source};

fn corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus")
}

fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else if Lang::of_path(&p).is_some() {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// (line, rule) pairs a file's comments expect.
fn expected(src: &str) -> BTreeSet<(usize, String)> {
    let mut out = BTreeSet::new();
    for (i, line) in src.lines().enumerate() {
        if let Some(pos) = line.find("expect: ") {
            for id in line[pos + 8..].split(',') {
                let id = id.trim().trim_end_matches("*/").trim();
                let id: String =
                    id.chars().take_while(|c| c.is_ascii_lowercase() || *c == '-').collect();
                if !id.is_empty() {
                    id.parse::<Rule>().unwrap_or_else(|e| panic!("line {}: {e}", i + 1));
                    out.insert((i + 1, id));
                }
            }
        }
    }
    out
}

fn check(kind: &str) -> (usize, Vec<String>) {
    let mut failures = Vec::new();
    let mut n = 0;
    for path in files(&corpus()) {
        let rel = path.strip_prefix(corpus()).unwrap();
        if rel.components().nth(1).map(|c| c.as_os_str().to_str().unwrap()) != Some(kind) {
            continue;
        }
        n += 1;
        let src = std::fs::read_to_string(&path).unwrap();
        let lang = Lang::of_path(&path).unwrap();
        let got: BTreeSet<(usize, String)> = review_source(&path, lang, &src, &Options::default())
            .findings
            .iter()
            .map(|f| (f.span.start_line, f.rule.id().to_owned()))
            .collect();
        let want = if kind == "fixed" { BTreeSet::new() } else { expected(&src) };
        if kind == "bad" {
            let own = rel.components().next().unwrap().as_os_str().to_str().unwrap();
            assert!(
                want.iter().any(|(_, r)| r == own),
                "{}: a bad file must expect its own rule",
                rel.display()
            );
        }
        let missing: Vec<_> = want.difference(&got).collect();
        let extra: Vec<_> = got.difference(&want).collect();
        if !missing.is_empty() || !extra.is_empty() {
            failures.push(format!("{}: missing {missing:?} extra {extra:?}", rel.display()));
        }
    }
    (n, failures)
}

#[test]
fn bad_files_get_exactly_the_expected_findings() {
    let (n, failures) = check("bad");
    assert!(n > 0);
    assert!(
        failures.is_empty(),
        "{} of {n} bad files differ:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn fixed_files_get_no_findings() {
    let (n, failures) = check("fixed");
    assert!(n > 0);
    assert!(
        failures.is_empty(),
        "{} of {n} fixed files differ:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn every_rule_has_bad_and_fixed_files_in_several_languages() {
    for rule in Rule::ALL {
        let dir = corpus().join(rule.id());
        for kind in ["bad", "fixed"] {
            let langs: BTreeSet<Lang> =
                files(&dir.join(kind)).iter().filter_map(|p| Lang::of_path(p)).collect();
            assert!(langs.len() >= 4, "{rule} {kind}: only {langs:?}");
        }
    }
}
