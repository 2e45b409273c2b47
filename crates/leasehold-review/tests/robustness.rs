//! No input makes a review panic or hang: truncated and mangled corpus files in every
//! language, deep nesting, a very long line, an empty file.

use std::path::Path;

use leasehold_review::{Lang, Options, review_source};

fn langs() -> Vec<(Lang, &'static str)> {
    [
        (Lang::Python, "py"),
        (Lang::Java, "java"),
        (Lang::Go, "go"),
        (Lang::JavaScript, "js"),
        (Lang::TypeScript, "ts"),
        (Lang::Tsx, "tsx"),
        (Lang::Rust, "rs"),
        (Lang::Php, "php"),
        (Lang::Ruby, "rb"),
    ]
    .into_iter()
    .filter(|(l, _)| l.compiled_in())
    .collect()
}

#[test]
fn truncated_and_mangled_corpus_files_never_panic() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus");
    let mut stack = vec![root];
    let mut n = 0;
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
                continue;
            }
            let Some(lang) = Lang::of_path(&p) else { continue };
            let src = std::fs::read_to_string(&p).unwrap();
            // Cut at a few char boundaries, and swap brackets and quotes for each other.
            for cut in [src.len() / 3, src.len() / 2, src.len() * 4 / 5] {
                let cut = (0..=cut).rev().find(|i| src.is_char_boundary(*i)).unwrap();
                review_source(&p, lang, &src[..cut], &Options::default());
            }
            let mangled: String = src
                .chars()
                .map(|c| match c {
                    '(' => '{',
                    '}' => ')',
                    '"' => '\'',
                    '\n' => ' ',
                    c => c,
                })
                .collect();
            review_source(&p, lang, &mangled, &Options::default());
            n += 1;
        }
    }
    assert!(n > 100);
}

#[test]
fn pathological_inputs_never_panic() {
    let deep = format!("{}lock{}", "(".repeat(20_000), ")".repeat(20_000));
    let long = format!("x = \"{}\" # lock nx\n", "a".repeat(2_000_000));
    let calls = "r.setnx('lock:a', 1)\n".repeat(20_000);
    for (lang, ext) in langs() {
        let path = format!("x.{ext}");
        for src in ["", "lock", "\u{feff}lock nx", &deep, &long, &calls, "redis.call('del'"] {
            review_source(Path::new(&path), lang, src, &Options::default());
        }
    }
}
