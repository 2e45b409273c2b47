//! The machine's boot-relative clock and boot identity, per platform. A lease's expiry is
//! judged on a clock that every process of the machine shares and that no wall-clock jump
//! moves; a reboot (a new boot identity) frees every lease.

use crate::{Error, Result};

/// Nanoseconds on the boot-relative clock ([`CLOCK`]).
pub(super) fn now_ns() -> Result<i64> {
    let ts = nix::time::clock_gettime(imp::CLOCK_ID)
        .map_err(|e| Error::backend("sqlite", format!("{} unavailable", imp::CLOCK), e))?;
    Ok(ts.tv_sec() * 1_000_000_000 + ts.tv_nsec())
}

/// Who decides expiry, for `Guarantees`.
pub(super) const EXPIRY: &str = imp::EXPIRY;

/// An identity of this boot, the same in every process until the machine restarts.
pub(super) fn boot_id() -> Result<String> {
    imp::boot_id()
}

#[cfg(any(target_os = "linux", target_os = "android"))]
mod imp {
    use crate::{Error, Result};

    /// Monotonic, counts suspend.
    pub const CLOCK_ID: nix::time::ClockId = nix::time::ClockId::CLOCK_BOOTTIME;
    pub const CLOCK: &str = "CLOCK_BOOTTIME";
    pub const EXPIRY: &str = "the machine's CLOCK_BOOTTIME, read inside the write transaction";

    pub fn boot_id() -> Result<String> {
        std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
            .map(|s| s.trim().to_owned())
            .map_err(|e| Error::backend("sqlite", "cannot read the boot id", e))
    }
}

#[cfg(any(target_os = "macos", target_os = "ios", target_os = "freebsd"))]
mod imp {
    use crate::{Error, Result};

    /// Monotonic since boot; on macOS it also counts sleep.
    pub const CLOCK_ID: nix::time::ClockId = nix::time::ClockId::CLOCK_MONOTONIC;
    pub const CLOCK: &str = "CLOCK_MONOTONIC";
    pub const EXPIRY: &str = "the machine's CLOCK_MONOTONIC, read inside the write transaction";

    /// `kern.boottime`, which the kernel sets once per boot.
    pub fn boot_id() -> Result<String> {
        use nix::libc;
        let mut tv = libc::timeval { tv_sec: 0, tv_usec: 0 };
        let mut len = std::mem::size_of::<libc::timeval>();
        // SAFETY: the name is a NUL-terminated C string, and `tv`/`len` describe a buffer of
        // exactly the size the kernel writes for kern.boottime.
        let rc = unsafe {
            libc::sysctlbyname(
                c"kern.boottime".as_ptr(),
                (&raw mut tv).cast(),
                &mut len,
                std::ptr::null_mut(),
                0,
            )
        };
        if rc != 0 {
            return Err(Error::backend(
                "sqlite",
                "cannot read kern.boottime",
                std::io::Error::last_os_error(),
            ));
        }
        Ok(format!("boot-{}.{:06}", tv.tv_sec, tv.tv_usec))
    }
}

#[cfg(not(any(
    target_os = "linux",
    target_os = "android",
    target_os = "macos",
    target_os = "ios",
    target_os = "freebsd"
)))]
mod imp {
    use crate::{Error, Result};

    pub const CLOCK_ID: nix::time::ClockId = nix::time::ClockId::CLOCK_MONOTONIC;
    pub const CLOCK: &str = "CLOCK_MONOTONIC";
    pub const EXPIRY: &str = "the machine's CLOCK_MONOTONIC, read inside the write transaction";

    /// No boot identity is known here: refusing is safer than guessing, since a wrong one
    /// would let a lease from before a reboot look live, or a live one look dead.
    pub fn boot_id() -> Result<String> {
        Err(Error::invalid(
            "sqlite:// needs a boot identity, known on Linux, Android, macOS, iOS and FreeBSD; \
             use another store on this system",
        ))
    }
}
