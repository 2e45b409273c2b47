//! Lock keys.

use std::fmt;
use std::str::FromStr;

use crate::{Error, Result};

/// The name of the thing excluded: UTF-8, 1..=512 bytes, no NUL.
///
/// Use the narrowest name that works (`order:42`, not `orders`).
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Key(String);

impl Key {
    /// Longest accepted key, in bytes.
    pub const MAX_LEN: usize = 512;

    /// Validates and wraps a key. Errors with [`Error::InvalidInput`], never panics.
    pub fn new(key: impl Into<String>) -> Result<Key> {
        let key = key.into();
        if key.is_empty() {
            return Err(Error::invalid("key is empty"));
        }
        if key.len() > Self::MAX_LEN {
            return Err(Error::invalid(format!(
                "key is {} bytes long; the limit is {} bytes",
                key.len(),
                Self::MAX_LEN
            )));
        }
        if key.contains('\0') {
            return Err(Error::invalid("key contains a NUL byte"));
        }
        Ok(Key(key))
    }

    /// A name for this crate's own bookkeeping that no caller's key can equal (it may hold a
    /// NUL); never sent to a store.
    pub(crate) fn internal(name: String) -> Key {
        Key(name)
    }

    /// The key as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl FromStr for Key {
    type Err = Error;
    fn from_str(s: &str) -> Result<Key> {
        Key::new(s)
    }
}

impl TryFrom<&str> for Key {
    type Error = Error;
    fn try_from(s: &str) -> Result<Key> {
        Key::new(s)
    }
}

impl TryFrom<String> for Key {
    type Error = Error;
    fn try_from(s: String) -> Result<Key> {
        Key::new(s)
    }
}

impl AsRef<str> for Key {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

impl serde::Serialize for Key {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits() {
        assert!(Key::new("").is_err());
        assert!(Key::new("a\0b").is_err());
        assert!(Key::new("x".repeat(512)).is_ok());
        assert!(Key::new("x".repeat(513)).is_err());
        // 512 bytes of multi-byte characters is fine, 513 is not.
        assert!(Key::new("é".repeat(256)).is_ok());
        assert!(Key::new(format!("{}x", "é".repeat(256))).is_err());
        assert_eq!(Key::new("order:42").unwrap().as_str(), "order:42");
    }
}
