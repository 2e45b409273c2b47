//! What one grant looks like in the buckets: the key's name as a NATS subject token, the
//! grant record in the grants' bucket (owner, fence, TTL, holder info), the release marker
//! that keeps the fence chain, and the heartbeat buckets' names.

use std::time::Duration;

use crate::{FenceToken, HolderInfo, OwnerToken};

/// The header carrying the fence of the grant a release marker ends (the chain a later grant
/// continues from).
pub(super) const FENCE_HEADER: &str = "Leasehold-Fence";
/// JetStream's compare-and-set: the write applies only while the subject's last message has
/// this sequence (0: the subject has no message).
pub(super) const EXPECTED_LAST: &str = "Nats-Expected-Last-Subject-Sequence";
/// The KV operation header (`DEL`, `PURGE`; absent on a put), as `nats kv` writes it.
pub(super) const KV_OPERATION: &str = "KV-Operation";

/// `key` as one subject token, readable where it can be: ASCII letters, digits, `-`, `_` and
/// `/` as they are, every other byte (`.` separates tokens, `=` is the escape) as `=XX`.
/// Injective, so two keys never share a subject.
pub(super) fn token(key: &str) -> String {
    let mut out = String::with_capacity(key.len());
    for b in key.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'/') {
            out.push(b as char);
        } else {
            out.push_str(&format!("={b:02X}"));
        }
    }
    out
}

/// [`token`] read back; `None` for a subject token no key of leasehold's makes.
pub(super) fn key_of(token: &str) -> Option<String> {
    let mut bytes = Vec::with_capacity(token.len());
    let mut it = token.bytes();
    while let Some(b) = it.next() {
        if b == b'=' {
            let hex = [it.next()?, it.next()?];
            bytes.push(u8::from_str_radix(std::str::from_utf8(&hex).ok()?, 16).ok()?);
        } else {
            bytes.push(b);
        }
    }
    String::from_utf8(bytes).ok()
}

/// The heartbeat bucket's lease length for a requested `ttl`: rounded **up** to two
/// significant digits of milliseconds, at least 100 ms, so the server keeps a grant at least
/// as long as its holder counts on, and a deployment has a bounded number of buckets.
pub(super) fn bucket_ttl_ms(ttl: Duration) -> u64 {
    let ms = ttl.as_nanos().div_ceil(1_000_000).max(100) as u64;
    let mut step = 1;
    while ms / step >= 100 {
        step *= 10;
    }
    ms.div_ceil(step) * step
}

/// The heartbeat bucket for leases of `ttl_ms` (see [`bucket_ttl_ms`]).
pub(super) fn beat_bucket(bucket: &str, ttl_ms: u64) -> String {
    format!("{bucket}-ttl-{ttl_ms}ms")
}

/// A grant as the grants' bucket keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Record {
    pub(super) owner: OwnerToken,
    pub(super) fence: u64,
    /// The heartbeat bucket's lease length ([`bucket_ttl_ms`]): where the holder's heartbeat is.
    pub(super) ttl_ms: u64,
    pub(super) info: Option<HolderInfo>,
}

impl Record {
    /// The value: `OWNER`, then `fence F ttl Tms`, then the holder's info line if any, so
    /// `nats kv get BUCKET KEY` shows who holds it.
    pub(super) fn encode(&self) -> String {
        let mut v = format!("{}\nfence {} ttl {}ms", self.owner, self.fence, self.ttl_ms);
        if let Some(i) = &self.info {
            v.push('\n');
            v.push_str(&i.encode());
        }
        v
    }

    /// [`Record::encode`] read back; `None` for a value leasehold did not write.
    pub(super) fn decode(v: &[u8]) -> Option<Record> {
        let v = std::str::from_utf8(v).ok()?;
        let mut lines = v.splitn(3, '\n');
        let owner = lines.next()?.parse().ok()?;
        let mut meta = lines.next()?.split(' ');
        let (Some("fence"), Some(fence), Some("ttl"), Some(ttl), None) =
            (meta.next(), meta.next(), meta.next(), meta.next(), meta.next())
        else {
            return None;
        };
        let fence = fence.parse().ok()?;
        let ttl_ms = ttl.strip_suffix("ms")?.parse().ok()?;
        let info = lines.next().and_then(HolderInfo::decode);
        Some(Record { owner, fence, ttl_ms, info })
    }

    pub(super) fn fence_token(&self) -> FenceToken {
        FenceToken::new(self.fence)
    }
}

/// The next fence after `prev` (the key's last fence, 0 when its chain is lost) for a grant
/// whose heartbeat the server stamped at `stamp_ns` (ns since 1970): `max(prev + 1, µs)`,
/// the rule of every clock-backed store (`docs/design.md` §4.2).
pub(super) fn next_fence(prev: u64, stamp_ns: i128) -> u64 {
    let us = u64::try_from(stamp_ns.div_euclid(1000)).unwrap_or(0);
    (prev + 1).max(us)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_readable_and_injective() {
        assert_eq!(token("jobs/nightly-1_a"), "jobs/nightly-1_a");
        assert_eq!(token("a.b c=é"), "a=2Eb=20c=3D=C3=A9");
        for k in ["a.b c=é", "=2E", "x#3", "*", ">", "ü/.."] {
            assert_eq!(key_of(&token(k)).as_deref(), Some(k));
        }
        assert_ne!(token("=2E"), token("."));
        assert_eq!(key_of("=Z1"), None);
    }

    #[test]
    fn bucket_ttls_round_up() {
        let ms = |n| bucket_ttl_ms(Duration::from_millis(n));
        assert_eq!((ms(1), ms(100), ms(101), ms(700)), (100, 100, 110, 700));
        assert_eq!((ms(1500), ms(30_000), ms(123_456)), (1500, 30_000, 130_000));
        assert_eq!(bucket_ttl_ms(Duration::from_micros(100_001)), 110);
        for n in [1, 99, 100, 999, 1001, 86_400_000] {
            assert!(ms(n) >= n, "{n}");
        }
        assert_eq!(beat_bucket("leasehold", 700), "leasehold-ttl-700ms");
    }

    #[test]
    fn records_round_trip() {
        let owner = OwnerToken::generate().unwrap();
        let info = Some(HolderInfo::this_process().with_command("job"));
        let r = Record { owner, fence: 1_733_300_000_000_001, ttl_ms: 700, info };
        assert_eq!(Record::decode(r.encode().as_bytes()), Some(r.clone()));
        let bare = Record { info: None, ..r };
        assert_eq!(Record::decode(bare.encode().as_bytes()), Some(bare));
        assert_eq!(Record::decode(b"someone else's value"), None);
    }

    #[test]
    fn fences_follow_the_chain_and_the_clock() {
        assert_eq!(next_fence(0, 1_700_000_000_000_000_000), 1_700_000_000_000_000);
        assert_eq!(
            next_fence(1_700_000_000_000_005, 1_700_000_000_000_000_000),
            1_700_000_000_000_006
        );
        assert_eq!(next_fence(7, -5), 8);
    }
}
