//! The checks every fence resource shares: what a resource read back ([`Installed`]), the
//! claim and check rules (`rule.rs`) applied to it, and the refusal they give.

use super::{Fencing, rule};
use crate::error::StaleReason;
use crate::{Error, FenceToken, Result};

cfg_fence_claim! {
    /// What a resource has installed, as read back when refusing.
    #[derive(Debug, Clone, PartialEq, Eq)]
    pub(crate) struct Installed {
        pub key: String,
        pub token: u64,
        pub owner: String,
    }
}

cfg_fence_resource! {
    /// Fence 0 means "this store issued no fence" (see [`crate::FenceRepeat::NoFence`]): such a
    /// grant cannot claim a fenced resource.
    pub(crate) fn require_token(resource: &str, fencing: &Fencing) -> Result<()> {
        if fencing.token().get() == 0 {
            return Err(Error::StaleFence {
                resource: resource.to_owned(),
                presented: fencing.token(),
                installed: None,
                reason: StaleReason::NoFence,
            });
        }
        Ok(())
    }
}

cfg_fence_claim! {
    /// The error for a claim whose fence is older than the resource's horizon.
    pub(crate) fn past_horizon(resource: &str, presented: &Fencing) -> Error {
        Error::StaleFence {
            resource: resource.to_owned(),
            presented: presented.token(),
            installed: None,
            reason: StaleReason::PastHorizon,
        }
    }

    pub(crate) fn stale(
        resource: &str,
        presented: &Fencing,
        installed: Option<Installed>,
    ) -> Error {
        let (installed, reason) = match installed {
            None => (None, StaleReason::Unclaimed),
            Some(i) if i.key != presented.key().as_str() => {
                (Some(FenceToken::new(i.token)), StaleReason::OtherKey { installed_key: i.key })
            }
            Some(i) if i.token == presented.token().get() => {
                (Some(FenceToken::new(i.token)), StaleReason::OtherOwner)
            }
            Some(i) if i.token < presented.token().get() => {
                (Some(FenceToken::new(i.token)), StaleReason::Unclaimed)
            }
            Some(i) => (Some(FenceToken::new(i.token)), StaleReason::Newer),
        };
        Error::StaleFence {
            resource: resource.to_owned(),
            presented: presented.token(),
            installed,
            reason,
        }
    }
}

impl Installed {
    cfg_fence_table! {
        fn as_claim(&self) -> (&str, u64, &str) {
            (&self.key, self.token, &self.owner)
        }
    }
}

/// The claim rule ([`rule::may_claim`]) for a claim read back from a resource.
// Used by the resources that check a claim in Rust rather than in their SQL; a build
// without one has no caller.
#[allow(dead_code)]
pub(crate) fn may_claim(installed: Option<&Installed>, f: &Fencing) -> bool {
    let owner = f.owner().hex();
    let owner = std::str::from_utf8(&owner).unwrap_or_default();
    rule::may_claim(installed.map(Installed::as_claim), (f.key().as_str(), f.token().get(), owner))
}

cfg_fence_table! {
    /// Succeeds iff `installed` is exactly `fencing` (key, token and owner): [`rule::may_apply`].
    pub(crate) fn verify(
        resource: &str,
        fencing: &Fencing,
        installed: Option<Installed>,
    ) -> Result<()> {
        let owner = fencing.owner().hex();
        let owner = std::str::from_utf8(&owner).unwrap_or_default();
        let presented = (fencing.key().as_str(), fencing.token().get(), owner);
        if rule::may_apply(installed.as_ref().map(Installed::as_claim), presented) {
            Ok(())
        } else {
            Err(stale(resource, fencing, installed))
        }
    }
}
