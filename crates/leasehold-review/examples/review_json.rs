//! Reviews the paths named on the command line as `leasehold review --format json` does and
//! prints the JSON report: the crate's own entry point for timing and for diffing findings
//! before and after a change without building the whole CLI
//! (`cargo run --release -p leasehold-review --example review_json -- PATH…`).
fn main() {
    let paths: Vec<std::path::PathBuf> = std::env::args_os().skip(1).map(Into::into).collect();
    let report = leasehold_review::review(&paths, &leasehold_review::Options::default());
    println!("{}", leasehold_review::render::json(&report));
}
