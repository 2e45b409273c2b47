//! `cfg_*!` macros, as tokio's: each names, once, the capability whose code uses the items it
//! wraps, so a build without a store that has it does not warn that they are unused. The
//! capabilities are internal Cargo features (`_networked`, `_sql`, ...) that each store's
//! feature line turns on, so adding a store touches its feature line, not this file. One item
//! per invocation.

/// `$item`, its dead-code and unused-import warnings silenced in builds where `$cfg` is false.
macro_rules! used_if {
    (($($cfg:tt)*) $($item:tt)*) => {
        #[cfg_attr(not($($cfg)*), allow(dead_code, unused_imports))]
        $($item)*
    };
}

/// Items any store uses (its URL options, its errors).
macro_rules! cfg_any_store {
    ($($item:tt)*) => {
        used_if! {
            (feature = "_store")
            $($item)*
        }
    };
}

/// Items the networked stores use (a server to connect to, probe and time out on).
macro_rules! cfg_networked {
    ($($item:tt)*) => {
        used_if! {
            (feature = "_networked")
            $($item)*
        }
    };
}

/// Items the SQL servers' stores use (sessions, driver options).
macro_rules! cfg_sql {
    ($($item:tt)*) => {
        used_if! {
            (feature = "_sql")
            $($item)*
        }
    };
}

/// Items the stores whose session lives on their servers use (a lease or session of the
/// server's): its signals and the shared session-store core.
// Used only by `backends/session.rs`, which builds only with these stores.
#[allow(unused_macros)]
macro_rules! cfg_store_session {
    ($($item:tt)*) => {
        used_if! {
            (feature = "_session-store")
            $($item)*
        }
    };
}

/// Items the stores that undo an abandoned request in the background use (a release waits
/// until no abandoned request can grab what it frees).
// Used only by `backends/session.rs`, which builds only with these stores.
#[allow(unused_macros)]
macro_rules! cfg_undoing {
    ($($item:tt)*) => {
        used_if! {
            (feature = "_undoing")
            $($item)*
        }
    };
}

/// Items every fence resource uses.
macro_rules! cfg_fence_resource {
    ($($item:tt)*) => {
        used_if! {
            (feature = "_fence-resource")
            $($item)*
        }
    };
}

/// Items the resources with a claim step use.
macro_rules! cfg_fence_claim {
    ($($item:tt)*) => {
        used_if! {
            (feature = "_fence-claim")
            $($item)*
        }
    };
}

/// Items the SQL fence tables use.
macro_rules! cfg_fence_table {
    ($($item:tt)*) => {
        used_if! {
            (feature = "_fence-table")
            $($item)*
        }
    };
}
