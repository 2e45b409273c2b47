//! The rules `leasehold review` checks: their ids (a finding's SARIF `ruleId`), severities and
//! one-line summaries. The long explanation of each rule is its page in `explain/`.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// How bad a finding is. Errors make `leasehold review` exit 1; warnings do not.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// Advisory: worth a look, not always a bug.
    Warning,
    /// A lock that does not exclude, or that can be lost or leak, under a failure the code
    /// does not handle.
    Error,
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Severity::Warning => "warning",
            Severity::Error => "error",
        })
    }
}

macro_rules! rules {
    ($($variant:ident = $id:literal, $sev:ident, $summary:literal;)*) => {
        /// One kind of lock misuse.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum Rule {
            $(#[doc = $summary] $variant,)*
        }

        impl Rule {
            /// Every rule, in the order the design guide's review procedure meets them.
            pub const ALL: &'static [Rule] = &[$(Rule::$variant,)*];

            /// The stable id: `--select`, `--ignore`, suppression comments and SARIF's `ruleId`.
            pub fn id(self) -> &'static str {
                match self { $(Rule::$variant => $id,)* }
            }

            /// Error for the six rules whose bug breaks exclusion or leaks the lock; warning
            /// for the rest.
            pub fn severity(self) -> Severity {
                match self { $(Rule::$variant => Severity::$sev,)* }
            }

            /// One line: what the rule detects.
            pub fn summary(self) -> &'static str {
                match self { $(Rule::$variant => $summary,)* }
            }
        }
    };
}

rules! {
    NxWithoutExpiry = "nx-without-expiry", Error,
        "SET NX / SETNX with no expiry, or with the expiry set by a separate command";
    ReleaseWithoutOwnerCheck = "release-without-owner-check", Error,
        "the lock key deleted without checking that this holder still owns it";
    RenewWithoutOwnerCheck = "renew-without-owner-check", Error,
        "the lock's expiry extended without checking that this holder still owns it";
    ConstantLockValue = "constant-lock-value", Error,
        "the lock value is a constant, a host name or a pid, so owners cannot be told apart";
    UncheckedAcquire = "unchecked-acquire", Error,
        "the acquire's reply is never read, or any non-error reply is taken as a grant";
    SessionLockOnPool = "session-lock-on-pool", Error,
        "a session-scoped lock taken and released through a connection pool";
    TimeoutMisread = "timeout-misread", Warning,
        "an acquire's timeout or error treated as a definite refusal or as a grant";
    FailOpen = "fail-open", Warning,
        "a store error around the lock swallowed, so the work runs without the lock";
    UnfencedEffect = "unfenced-effect", Warning,
        "a lock guards a write to another resource with no fence token or idempotency key in sight";
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.id())
    }
}

/// A rule id that names no rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownRule(pub String);

impl fmt::Display for UnknownRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ids: Vec<&str> = Rule::ALL.iter().map(|r| r.id()).collect();
        write!(f, "unknown rule {:?} (rules: {})", self.0, ids.join(", "))
    }
}

impl std::error::Error for UnknownRule {}

impl FromStr for Rule {
    type Err = UnknownRule;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Rule::ALL.iter().copied().find(|r| r.id() == s).ok_or_else(|| UnknownRule(s.to_owned()))
    }
}

impl Serialize for Rule {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.id())
    }
}

impl<'de> Deserialize<'de> for Rule {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip_and_six_are_errors() {
        for r in Rule::ALL {
            assert_eq!(r.id().parse::<Rule>().unwrap(), *r);
        }
        let errors = Rule::ALL.iter().filter(|r| r.severity() == Severity::Error).count();
        assert_eq!(errors, 6);
        assert!("nx".parse::<Rule>().unwrap_err().to_string().contains("fail-open"));
    }
}
