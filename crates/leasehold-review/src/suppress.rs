//! Inline suppression comments: `leasehold: ignore[rule-id] reason`.
use std::path::Path;

use crate::FileReview;

/// Drops the findings a suppression comment covers, and notes malformed comments.
pub(crate) fn apply(_path: &Path, _src: &str, _out: &mut FileReview) {}
