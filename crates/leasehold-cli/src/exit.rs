//! How a command ends: its exit code (sysexits(3), plus leasehold's own) and the one line
//! for stderr, shared by every command module.

use leasehold::Error;

/// sysexits(3) codes, plus our own for a lost lease.
pub(crate) mod code {
    pub const USAGE: u8 = 64;
    pub const UNAVAILABLE: u8 = 69;
    pub const CONFIG: u8 = 78;
    pub const SOFTWARE: u8 = 70;
    pub const BUSY: u8 = 75;
    pub const NOT_OWNER: u8 = 77;
    pub const LOST: u8 = 79;
    pub const CANNOT_EXECUTE: u8 = 126;
    pub const NOT_FOUND: u8 = 127;
}

/// How a command ends: an exit code and, unless it is a success, one line for stderr.
pub(crate) struct Exit {
    pub(crate) code: u8,
    pub(crate) msg: Option<String>,
}

impl Exit {
    pub(crate) fn ok(code: u8) -> Self {
        Exit { code, msg: None }
    }
    pub(crate) fn fail(code: u8, msg: impl Into<String>) -> Self {
        Exit { code, msg: Some(msg.into()) }
    }
}

impl From<Error> for Exit {
    fn from(e: Error) -> Self {
        let code = match &e {
            Error::InvalidInput(_) | Error::Unsupported { .. } => code::USAGE,
            Error::Busy { .. } | Error::HeldByThisLocker { .. } => code::BUSY,
            Error::NotOwner { .. } => code::NOT_OWNER,
            Error::Lost { .. } => code::LOST,
            Error::Config { .. } => code::CONFIG,
            _ => code::UNAVAILABLE,
        };
        // The whole chain on one line.
        let mut msg = e.to_string();
        let mut src = std::error::Error::source(&e);
        while let Some(cause) = src {
            let text = cause.to_string();
            if !msg.contains(&text) {
                msg = format!("{msg}: {text}");
            }
            src = cause.source();
        }
        Exit::fail(code, msg.replace('\n', " "))
    }
}
