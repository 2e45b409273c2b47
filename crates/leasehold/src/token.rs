//! Owner tokens and fencing tokens.

use std::fmt;
use std::str::FromStr;

use crate::{Error, Result};

/// A 128-bit random id minted per acquisition attempt from the OS CSPRNG and never reused.
///
/// Every renew and release compares it atomically in the store. Printed as 32 lowercase hex
/// digits.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct OwnerToken([u8; 16]);

impl OwnerToken {
    /// Mints a fresh token. Errors only if the OS random source is unavailable.
    pub fn generate() -> Result<OwnerToken> {
        let mut b = [0u8; 16];
        getrandom::fill(&mut b)
            .map_err(|e| Error::unavailable(format!("OS random source failed: {e}"), None))?;
        Ok(OwnerToken(b))
    }

    /// The raw bytes.
    pub fn as_bytes(&self) -> &[u8; 16] {
        &self.0
    }
}

impl OwnerToken {
    /// The 32 lowercase hex digits of [`Display`](fmt::Display), without allocating: what
    /// the stores send and compare.
    pub(crate) fn hex(&self) -> [u8; 32] {
        const HEX: &[u8; 16] = b"0123456789abcdef";
        let mut out = [0u8; 32];
        for (i, b) in self.0.iter().enumerate() {
            out[2 * i] = HEX[usize::from(b >> 4)];
            out[2 * i + 1] = HEX[usize::from(b & 0xf)];
        }
        out
    }
}

impl fmt::Display for OwnerToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Only ASCII hex digits were written.
        f.write_str(std::str::from_utf8(&self.hex()).map_err(|_| fmt::Error)?)
    }
}

impl fmt::Debug for OwnerToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "OwnerToken({self})")
    }
}

impl FromStr for OwnerToken {
    type Err = Error;
    /// Parses exactly 32 hex digits (either case).
    fn from_str(s: &str) -> Result<OwnerToken> {
        let bad = || Error::invalid(format!("owner token {s:?} is not 32 hex digits"));
        if s.len() != 32 || !s.is_ascii() {
            return Err(bad());
        }
        let mut b = [0u8; 16];
        for (i, out) in b.iter_mut().enumerate() {
            *out = u8::from_str_radix(&s[2 * i..2 * i + 2], 16).map_err(|_| bad())?;
        }
        Ok(OwnerToken(b))
    }
}

impl serde::Serialize for OwnerToken {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// A fencing token: strictly increasing per key across all grants of that key, issued by the
/// store atomically with the grant, never reset by release or expiry.
///
/// What "never" survives depends on the store; see [`crate::Guarantees::fence`].
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug, serde::Serialize)]
#[serde(transparent)]
pub struct FenceToken(u64);

impl FenceToken {
    /// Wraps a raw value (as read back from a resource or an environment variable).
    pub const fn new(v: u64) -> Self {
        FenceToken(v)
    }

    /// The raw value.
    pub const fn get(self) -> u64 {
        self.0
    }

    /// The value for a signed 64-bit column (PostgreSQL `bigint`, SQLite `INTEGER`, MySQL
    /// `BIGINT`), which is where fences are kept: bind it without a cast,
    /// `tx.execute("UPDATE t SET fence = $1 WHERE id = $2 AND fence <= $1", &[&f.as_i64(),
    /// &id])`.
    ///
    /// Overflow: a fence above `i64::MAX` saturates to `i64::MAX`. No store here issues
    /// one: fences are at most about the store's clock in µs since 1970 (§4.2 of
    /// `docs/design.md`), which passes `i64::MAX` in the year 294,247, and etcd and ZooKeeper
    /// fences are signed 64-bit revisions to begin with. A saturated fence would compare
    /// equal to every later one, so a resource would no longer tell them apart: a fence
    /// from a store of your own that can exceed `i64::MAX` belongs in an unsigned column
    /// (MySQL `BIGINT UNSIGNED`, bound with [`FenceToken::get`]).
    pub const fn as_i64(self) -> i64 {
        if self.0 > i64::MAX as u64 { i64::MAX } else { self.0 as i64 }
    }

    /// A fence read back from a signed 64-bit column (the inverse of [`FenceToken::as_i64`]);
    /// a negative value, which no fence is, reads as 0.
    pub const fn from_i64(v: i64) -> Self {
        FenceToken(if v < 0 { 0 } else { v as u64 })
    }
}

impl fmt::Display for FenceToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// The fence of a grant (`docs/design.md` §4.2): `max(counter + 1, clock_us)`, `counter` being
/// the last fence the store issued for the key (0 for none) and `clock_us` the store's clock
/// in µs since 1970. In normal operation the counter keeps fences growing whatever the clock
/// does; after a failure that forgot or rolled back the counter, the clock restarts fences
/// above every earlier one while [`crate::CLOCK_ASSUMPTION`] holds. Saturates at `u64::MAX`.
/// The SQL and Lua forms of the stores are pinned to it by the testkit's `rules` test.
#[cfg_attr(
    not(any(feature = "tools", all(feature = "file", target_os = "linux"))),
    allow(dead_code)
)]
#[inline]
pub fn next_fence(counter: u64, clock_us: u64) -> u64 {
    counter.saturating_add(1).max(clock_us)
}

/// The wall clock in µs since 1970: the floor under fences of stores that keep their counter
/// in a file this process writes (see [`crate::FenceRepeat::ClockBacked`]). A clock before
/// 1970 counts as 0 (the counter alone then keeps fences growing).
#[cfg_attr(not(feature = "_local"), allow(dead_code))]
pub(crate) fn wall_clock_us() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The SQL columns' i64, both ways, with the overflow case as documented.
    #[test]
    fn fences_convert_to_and_from_i64_columns() {
        assert_eq!(FenceToken::new(1_764_000_000_000_000).as_i64(), 1_764_000_000_000_000);
        assert_eq!(FenceToken::new(i64::MAX as u64).as_i64(), i64::MAX);
        assert_eq!(FenceToken::new(u64::MAX).as_i64(), i64::MAX, "saturates");
        assert_eq!(FenceToken::from_i64(42), FenceToken::new(42));
        assert_eq!(FenceToken::from_i64(-1), FenceToken::new(0));
        let f = FenceToken::new(7);
        assert_eq!(FenceToken::from_i64(f.as_i64()), f);
    }

    #[test]
    fn next_fence_is_the_counter_or_the_clock() {
        assert_eq!(next_fence(0, 1_700_000_000_000_000), 1_700_000_000_000_000);
        assert_eq!(next_fence(41, 40), 42, "a clock behind the counter: the counter wins");
        assert_eq!(next_fence(41, 42), 42);
        assert_eq!(next_fence(u64::MAX, 0), u64::MAX, "saturates");
    }

    #[test]
    fn owner_round_trip_and_uniqueness() {
        let a = OwnerToken::generate().unwrap();
        let b = OwnerToken::generate().unwrap();
        assert_ne!(a, b);
        let s = a.to_string();
        assert_eq!(s.len(), 32);
        assert_eq!(&a.hex()[..], s.as_bytes(), "what the stores send is the Display form");
        assert_eq!(s.parse::<OwnerToken>().unwrap(), a);
        assert_eq!(s.to_uppercase().parse::<OwnerToken>().unwrap(), a);
        for bad in ["", "xyz", &s[..31], &format!("{s}0"), "é5555555555555555555555555555555"] {
            assert!(bad.parse::<OwnerToken>().is_err(), "{bad:?}");
        }
    }
}
