//! Each rule's explanation page (`leasehold review --explain RULE`, SARIF's `help`): markdown
//! files in the crate's `explain/` directory, compiled in.

use crate::Rule;

/// The rule's explanation page, in markdown: what it detects, why it breaks (a timeline), a
/// bad and a fixed example in Python (redis-py) and another language, what to use instead,
/// and leasehold's way.
pub fn explain(rule: Rule) -> &'static str {
    match rule {
        Rule::NxWithoutExpiry => include_str!("../../explain/nx-without-expiry.md"),
        Rule::ReleaseWithoutOwnerCheck => {
            include_str!("../../explain/release-without-owner-check.md")
        }
        Rule::RenewWithoutOwnerCheck => include_str!("../../explain/renew-without-owner-check.md"),
        Rule::ConstantLockValue => include_str!("../../explain/constant-lock-value.md"),
        Rule::UncheckedAcquire => include_str!("../../explain/unchecked-acquire.md"),
        Rule::SessionLockOnPool => include_str!("../../explain/session-lock-on-pool.md"),
        Rule::TimeoutMisread => include_str!("../../explain/timeout-misread.md"),
        Rule::FailOpen => include_str!("../../explain/fail-open.md"),
        Rule::UnfencedEffect => include_str!("../../explain/unfenced-effect.md"),
    }
}

/// The page's first paragraph (what the rule detects), on one line.
pub(super) fn first_paragraph(page: &str) -> String {
    page.split("\n\n")
        .map(str::trim)
        .find(|p| !p.is_empty() && !p.starts_with('#'))
        .unwrap_or("")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}
