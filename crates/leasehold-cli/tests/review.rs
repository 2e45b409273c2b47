//! `leasehold review` as a CI job runs it: exit codes 0/1/2, the formats, --explain, notes
//! instead of aborts.
//!
//! The tests marked "needs the analysis" expect findings from the per-file analysis; they
//! fail on a branch where `analyze` is still a stub.

use std::path::Path;
use std::process::{Command, Output};

use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_leasehold");

const RULES: [&str; 9] = [
    "nx-without-expiry",
    "release-without-owner-check",
    "renew-without-owner-check",
    "constant-lock-value",
    "unchecked-acquire",
    "session-lock-on-pool",
    "timeout-misread",
    "fail-open",
    "unfenced-effect",
];

/// SETNX with no expiry: an error-level finding once the analysis runs.
const SETNX: &str = "import redis\nr = redis.Redis()\nr.setnx('lock:job', '1')\n";
const CLEAN: &str = "import os\nprint(os.getcwd())\n";

fn review(dir: &Path, args: &[&str]) -> Output {
    Command::new(BIN)
        .arg("review")
        .args(args)
        .current_dir(dir)
        .env_remove("NO_COLOR")
        .output()
        .unwrap()
}

fn code(o: &Output) -> i32 {
    o.status.code().unwrap_or(-1)
}

fn out(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn err(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn tree(files: &[(&str, &[u8])]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (name, text) in files {
        let p = dir.path().join(name);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    dir
}

fn json(o: &Output) -> Value {
    serde_json::from_str(&out(o)).unwrap_or_else(|e| panic!("{e}: {}", out(o)))
}

#[test]
fn a_clean_tree_exits_0_with_a_summary() {
    let d = tree(&[("app/main.py", CLEAN.as_bytes()), ("README.md", b"# hi\n")]);
    let o = review(d.path(), &[]);
    assert_eq!(code(&o), 0, "{}", err(&o));
    assert_eq!(out(&o), "0 errors, 0 warnings in 1 file (2 lines)\n");
    assert!(!out(&o).contains('\x1b'), "no colours into a pipe");
    assert!(err(&o).is_empty(), "{}", err(&o));
    // Named paths, several of them.
    let o = review(d.path(), &["app", "app/main.py"]);
    assert_eq!(
        out(&o),
        "0 errors, 0 warnings in 1 file (2 lines)\n",
        "a file reached twice is read once"
    );
}

/// Needs the analysis.
#[test]
fn setnx_without_expiry_is_an_error_and_exits_1() {
    let d = tree(&[("job.py", SETNX.as_bytes())]);
    let o = review(d.path(), &[]);
    assert_eq!(code(&o), 1, "{}{}", out(&o), err(&o));
    let text = out(&o);
    assert!(text.contains("error[nx-without-expiry]"), "{text}");
    assert!(text.contains(" --> job.py:3:"), "{text}");
    assert!(text.contains("3 | r.setnx('lock:job', '1')"), "{text}");
    assert!(text.contains("^^^"), "{text}");
    assert!(text.contains("= fix: "), "{text}");
    assert!(text.contains("1 error, "), "{text}");
    // --ignore and --select take it out: warnings and nothing exit 0.
    let o = review(d.path(), &["--ignore", "nx-without-expiry"]);
    assert_eq!(code(&o), 0, "{}", out(&o));
    let o = review(d.path(), &["--select", "fail-open,unfenced-effect"]);
    assert_eq!(code(&o), 0, "{}", out(&o));
    let o = review(d.path(), &["--select", "nx-without-expiry", "--format", "json"]);
    assert_eq!(code(&o), 1);
    let v = json(&o);
    assert_eq!(v["findings"][0]["rule"], "nx-without-expiry");
    assert_eq!(v["findings"][0]["severity"], "error");
    assert_eq!(v["findings"][0]["path"], "job.py");
    let o = review(d.path(), &["--inventory", "--format", "json"]);
    let v = json(&o);
    assert_eq!(v["inventory"][0]["store"], "redis");
    assert_eq!(v["inventory"][0]["expiry"], "none");
}

/// Needs the analysis.
#[test]
fn sarif_result_points_at_the_setnx() {
    let d = tree(&[("src/job.py", SETNX.as_bytes())]);
    let o = review(d.path(), &["--format", "sarif", "-o", "out.sarif"]);
    assert_eq!(code(&o), 1, "{}", err(&o));
    assert!(out(&o).is_empty(), "{}", out(&o));
    assert!(err(&o).contains("1 error, 0 warnings in 1 file; report in out.sarif"), "{}", err(&o));
    let v: Value =
        serde_json::from_str(&std::fs::read_to_string(d.path().join("out.sarif")).unwrap())
            .unwrap();
    let r = &v["runs"][0]["results"][0];
    assert_eq!(r["ruleId"], "nx-without-expiry");
    assert_eq!(r["ruleIndex"], 0);
    assert_eq!(r["level"], "error");
    let loc = &r["locations"][0]["physicalLocation"];
    assert_eq!(loc["artifactLocation"]["uri"], "src/job.py");
    assert_eq!(loc["artifactLocation"]["uriBaseId"], "%SRCROOT%");
    assert_eq!(loc["region"]["startLine"], 3);
    assert!(r["partialFingerprints"]["leaseholdFingerprint/v1"].as_str().unwrap().ends_with(":1"));
}

/// Needs the analysis.
#[test]
fn a_suppression_comment_is_honoured() {
    let suppressed = "import redis\nr = redis.Redis()\n\
        # leasehold: ignore[nx-without-expiry] the key is removed by the deploy script\n\
        r.setnx('lock:job', '1')\n";
    let same_line = "import redis\nr = redis.Redis()\n\
        r.setnx('lock:job', '1')  # leasehold: ignore[nx-without-expiry] test fixture\n";
    let no_reason = "import redis\nr = redis.Redis()\n\
        r.setnx('lock:job', '1')  # leasehold: ignore[nx-without-expiry]\n";
    let d = tree(&[("a.py", suppressed.as_bytes()), ("b.py", same_line.as_bytes())]);
    let o = review(d.path(), &[]);
    assert_eq!(code(&o), 0, "{}", out(&o));
    assert!(out(&o).starts_with("0 errors, 0 warnings in 2 files"), "{}", out(&o));
    let d = tree(&[("c.py", no_reason.as_bytes())]);
    let o = review(d.path(), &[]);
    assert_eq!(code(&o), 1, "a suppression without a reason suppresses nothing: {}", out(&o));
    assert!(
        out(&o)
            .contains("note: c.py: line 3: the suppression of nx-without-expiry gives no reason"),
        "{}",
        out(&o)
    );
}

#[test]
fn a_bad_suppression_is_a_note() {
    let d = tree(&[("s.py", b"r = 1  # leasehold: ignore[no-such-rule] because\n")]);
    let o = review(d.path(), &["--format", "json"]);
    assert_eq!(code(&o), 0, "{}", err(&o));
    let v = json(&o);
    assert_eq!(v["notes"][0]["kind"], "bad-suppression");
    assert_eq!(v["notes"][0]["path"], "s.py");
    let msg = v["notes"][0]["message"].as_str().unwrap();
    assert!(msg.starts_with("line 1: unknown rule \"no-such-rule\""), "{msg}");
}

#[test]
fn sarif_is_2_1_0_with_every_rule() {
    let d = tree(&[("main.py", CLEAN.as_bytes()), ("bin.py", b"\0\x01")]);
    let o = review(d.path(), &["--format", "sarif"]);
    assert_eq!(code(&o), 0, "{}", err(&o));
    let v = json(&o);
    assert_eq!(v["version"], "2.1.0");
    assert_eq!(v["$schema"], "https://json.schemastore.org/sarif-2.1.0.json");
    let driver = &v["runs"][0]["tool"]["driver"];
    assert_eq!(driver["name"], "leasehold-review");
    let ids: Vec<&str> =
        driver["rules"].as_array().unwrap().iter().map(|r| r["id"].as_str().unwrap()).collect();
    assert_eq!(ids, RULES);
    for r in driver["rules"].as_array().unwrap() {
        assert!(r["help"]["markdown"].as_str().unwrap().contains("## leasehold's way"));
        assert_eq!(r["properties"]["tags"], serde_json::json!(["concurrency", "distributed-lock"]));
    }
    assert_eq!(v["runs"][0]["results"], serde_json::json!([]));
    let n = &v["runs"][0]["invocations"][0]["toolExecutionNotifications"][0];
    assert_eq!(n["descriptor"]["id"], "binary");
}

#[test]
fn json_has_a_version_findings_notes_and_stats() {
    let d = tree(&[("main.py", CLEAN.as_bytes())]);
    let o = review(d.path(), &["--format", "json"]);
    assert_eq!(code(&o), 0);
    let v = json(&o);
    assert_eq!(v["version"], 1);
    assert_eq!(v["findings"], serde_json::json!([]));
    assert_eq!(v["stats"]["files"], 1);
    assert_eq!(v["stats"]["lines"], 2);
    let o = review(d.path(), &["--inventory", "--format", "json"]);
    let v = json(&o);
    assert_eq!((v["version"].clone(), v["inventory"].clone()), (1.into(), serde_json::json!([])));
    let o = review(d.path(), &["--inventory"]);
    assert_eq!(out(&o), "0 lock sites in 0 files (1 reviewed)\n");
}

#[test]
fn explain_prints_every_rule_page() {
    let d = tempfile::tempdir().unwrap();
    for id in RULES {
        let o = review(d.path(), &["--explain", id]);
        assert_eq!(code(&o), 0, "{id}: {}", err(&o));
        let page = out(&o);
        assert!(page.starts_with(&format!("# {id}: ")), "{id}: {page:.100}");
        assert!(page.contains("## leasehold's way") && page.contains("```python"), "{id}");
    }
    let o = review(d.path(), &["--explain", "nx"]);
    assert_eq!(code(&o), 2);
    assert!(
        err(&o).contains("unknown rule \"nx\"") && err(&o).contains("unfenced-effect"),
        "{}",
        err(&o)
    );
}

#[test]
fn usage_errors_exit_2_in_one_line() {
    let d = tree(&[("main.py", CLEAN.as_bytes())]);
    for (args, says) in [
        (vec!["--select", "nx-without-expiry,bogus"], "unknown rule \"bogus\""),
        (vec!["--ignore", "bogus"], "nx-without-expiry, release-without-owner-check"),
        (vec!["missing-dir"], "missing-dir: no such file or directory"),
        (vec!["main.py", "missing.py"], "missing.py: no such file or directory"),
        (vec!["--format", "xml"], "invalid value 'xml'"),
        (vec!["--max-file-size", "2X"], "K, M or G"),
        (vec!["--threads", "many"], "invalid value 'many'"),
        (vec!["--no-such-flag"], "--no-such-flag"),
        (vec!["--inventory", "--format", "sarif"], "not SARIF"),
        (vec!["-o", "no/such/dir/out.txt"], "cannot write no/such/dir/out.txt"),
    ] {
        let o = review(d.path(), &args);
        assert_eq!(code(&o), 2, "{args:?}: {}", err(&o));
        assert!(err(&o).contains(says), "{args:?}: {}", err(&o));
        assert_eq!(err(&o).lines().count(), 1, "{args:?}: {}", err(&o));
    }
    // Help is not an error; the rest of the CLI keeps sysexits' 64.
    let o = review(d.path(), &["--help"]);
    assert_eq!(code(&o), 0);
    assert!(
        out(&o).contains("Exit codes") && out(&o).contains("1   at least one error-level finding")
    );
    let o = Command::new(BIN).args(["status", "--no-such-flag"]).output().unwrap();
    assert_eq!(code(&o), 64, "{}", err(&o));
}

#[test]
fn a_binary_file_is_a_note_not_an_abort() {
    let d = tree(&[
        ("bin.py", b"\x7fELF\0\0\x01"),
        ("gen.go", b"// Code generated by stringer. DO NOT EDIT.\npackage x\n"),
        ("big.rb", &[b'x'; 3000]),
        ("main.py", CLEAN.as_bytes()),
    ]);
    let o = review(d.path(), &["--max-file-size", "1K"]);
    assert_eq!(code(&o), 0, "{}", err(&o));
    let text = out(&o);
    assert!(text.contains("note: big.rb: 3000 bytes, over the limit of 1024"), "{text}");
    assert!(text.contains("note: bin.py: binary"), "{text}");
    assert!(text.contains("note: gen.go: generated code"), "{text}");
    assert!(text.ends_with("0 errors, 0 warnings in 3 files (2 lines)\n"), "{text}");
}

/// Needs the analysis (the parse-error note comes from it).
#[test]
fn syntax_errors_are_a_note_not_an_abort() {
    let broken = format!("{SETNX}def broken(:\n    pass\n");
    let d = tree(&[("broken.py", broken.as_bytes()), ("main.py", CLEAN.as_bytes())]);
    let o = review(d.path(), &["--format", "json"]);
    assert_eq!(code(&o), 1, "what parsed is still reviewed: {}", out(&o));
    let v = json(&o);
    assert_eq!(v["stats"]["files"], 2);
    let notes = v["notes"].as_array().unwrap();
    assert!(
        notes.iter().any(|n| n["path"] == "broken.py" && n["kind"] == "parse-error"),
        "{notes:?}"
    );
}

#[test]
fn the_output_file_gets_the_report_and_stdout_nothing() {
    let d = tree(&[("main.py", CLEAN.as_bytes())]);
    let o = review(d.path(), &["-o", "report.txt"]);
    assert_eq!(code(&o), 0, "{}", err(&o));
    assert!(out(&o).is_empty());
    let text = std::fs::read_to_string(d.path().join("report.txt")).unwrap();
    assert_eq!(text, "0 errors, 0 warnings in 1 file (2 lines)\n");
}
