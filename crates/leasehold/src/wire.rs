//! How a protocol shows itself at an address, for `backends/peer.rs`'s probe of what answers
//! at a store's port: its name in a message and what its first bytes look like. Each store's
//! is on its line in `registry.rs`'s list of stores (`for_each_store!`), expanded here into
//! [`Speaks`] with nothing else of the line, so it needs no store's code: a store compiled out
//! is still recognized (a `redis://` URL at a MySQL port is named so in a build without
//! MySQL), and the probe, which the stores call, reaches no store and not the registry. The
//! services that are no leasehold store (HTTP, TLS, SSH) are in `peer.rs`.

/// One protocol the probe can name.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Wire {
    /// Its name in messages ("Redis", "MySQL/MariaDB").
    pub name: &'static str,
    /// Whether messages write "an" before [`Wire::name`] ("an etcd", "an HTTP").
    an: bool,
    /// Whether the first bytes a server sent (its greeting, or its answer to one of the
    /// probe's questions: PostgreSQL's `SSLRequest`, or `PING` and an empty line) are this
    /// protocol's; `None` for one that answers neither question in a way of its own.
    pub shows: Option<fn(&[u8]) -> bool>,
    /// For a store that also serves HTTP/1 on its own port: what its answer to
    /// `GET /version` contains, so that an HTTP answer there is not taken for a wrong service.
    pub version_says: Option<&'static [u8]>,
}

impl Wire {
    /// A protocol named `name`, written "a `name`" in messages, that the probe cannot tell.
    pub const fn a(name: &'static str) -> Self {
        Wire { name, an: false, shows: None, version_says: None }
    }

    /// The same, written "an `name`".
    pub const fn an(name: &'static str) -> Self {
        Wire { an: true, ..Wire::a(name) }
    }

    /// Told by the first bytes its server sends, when `shows` says so.
    pub const fn shown_by(self, shows: fn(&[u8]) -> bool) -> Self {
        Wire { shows: Some(shows), ..self }
    }

    /// Serving HTTP/1 on its own port too, its `GET /version` answer containing `says`.
    pub const fn over_http(self, says: &'static [u8]) -> Self {
        Wire { version_says: Some(says), ..self }
    }

    /// The name with its article, for a message ("a Redis", "an HTTP").
    pub fn a_name(&self) -> String {
        format!("{} {}", if self.an { "an" } else { "a" }, self.name)
    }

    /// Whether `first` (the first bytes a server sent) are this protocol's.
    pub fn answers(&self, first: &[u8]) -> bool {
        self.shows.is_some_and(|shows| shows(first))
    }
}

/// `registry.rs`'s list of stores as [`Speaks`]: one constant per line with a `speaks`
/// clause, named as the line's `Scheme` variant, and all of them in [`Speaks::STORES`]; the
/// rest of each line (its descriptor above all) is matched and left out.
macro_rules! wires {
    ($(
        $(#[$doc:meta])*
        $variant:ident [$($scheme:literal),+] feature $feature:literal if ($($cfg:tt)+) => $store:path
            $(; speaks $wire:expr)?,
    )+) => {
        /// The protocols of the stores on a port, as a store's handshake expects its own
        /// (`Speaks::Redis` for every form of Redis) and as the probe names what answers.
        pub(crate) struct Speaks;

        // Named as the `Scheme` variants they belong to.
        #[allow(non_upper_case_globals)]
        impl Speaks {
            $($(
                #[doc = concat!("The protocol of `Scheme::", stringify!($variant), "`.")]
                pub const $variant: Wire = $wire;
            )?)+

            /// Every store's protocol, built into this build or not, in the list's order (the
            /// `stringify!` only ties each entry to its line's `speaks` clause).
            pub const STORES: &[Wire] = &[$($({
                let _ = stringify!($wire);
                Speaks::$variant
            },)?)+];
        }
    };
}

for_each_store!(wires);
