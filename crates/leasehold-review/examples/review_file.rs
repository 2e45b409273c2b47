//! Reviews the files named on the command line and prints each finding's rule, line and
//! message: a debugging aid for rule work (`cargo run -p leasehold-review --example review_file -- FILE…`).
fn main() {
    for p in std::env::args().skip(1) {
        let path = std::path::Path::new(&p);
        let Some(lang) = leasehold_review::Lang::of_path(path) else { continue };
        let src = std::fs::read_to_string(path).unwrap_or_default();
        let out = leasehold_review::review_source(
            path,
            lang,
            &src,
            &leasehold_review::Options::default(),
        );
        for f in out.findings {
            println!("{p}:{} {} {}", f.span.start_line, f.rule, f.message);
        }
        for s in out.inventory {
            println!(
                "{p}:{} site {:?} key={} expiry={} owner={} release={:?} renew={:?} fence={} {:?}",
                s.span.start_line,
                s.store,
                s.key,
                s.expiry,
                s.owner,
                s.release,
                s.renew,
                s.fence,
                s.findings
            );
        }
    }
}
