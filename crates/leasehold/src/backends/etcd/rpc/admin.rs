//! The Lease, Auth, Cluster, Maintenance and v3lock messages.

use super::ResponseHeader;

/// Grants a lease of `ttl` seconds (the server may raise it to its minimum).
#[derive(Clone, PartialEq, prost::Message)]
pub struct LeaseGrantRequest {
    /// Seconds.
    #[prost(int64, tag = "1")]
    pub ttl: i64,
    /// The id wanted; 0 to let the server choose.
    #[prost(int64, tag = "2")]
    pub id: i64,
}

/// The lease granted.
#[derive(Clone, PartialEq, prost::Message)]
pub struct LeaseGrantResponse {
    /// Answering member and revision.
    #[prost(message, optional, tag = "1")]
    pub header: Option<ResponseHeader>,
    /// The lease's id.
    #[prost(int64, tag = "2")]
    pub id: i64,
    /// Its TTL in seconds, as the server set it.
    #[prost(int64, tag = "3")]
    pub ttl: i64,
    /// Why it was not granted.
    #[prost(string, tag = "4")]
    pub error: String,
}

/// Ends lease `id` and deletes every key bound to it.
#[derive(Clone, PartialEq, prost::Message)]
pub struct LeaseRevokeRequest {
    /// The lease.
    #[prost(int64, tag = "1")]
    pub id: i64,
}

/// The answer to a [`LeaseRevokeRequest`].
#[derive(Clone, PartialEq, prost::Message)]
pub struct LeaseRevokeResponse {
    /// Answering member and revision.
    #[prost(message, optional, tag = "1")]
    pub header: Option<ResponseHeader>,
}

/// Restarts lease `id`'s TTL.
#[derive(Clone, PartialEq, prost::Message)]
pub struct LeaseKeepAliveRequest {
    /// The lease.
    #[prost(int64, tag = "1")]
    pub id: i64,
}

/// The answer to a [`LeaseKeepAliveRequest`].
#[derive(Clone, PartialEq, prost::Message)]
pub struct LeaseKeepAliveResponse {
    /// Answering member and revision.
    #[prost(message, optional, tag = "1")]
    pub header: Option<ResponseHeader>,
    /// The lease.
    #[prost(int64, tag = "2")]
    pub id: i64,
    /// Its new TTL in seconds; 0 or less when the lease no longer exists.
    #[prost(int64, tag = "3")]
    pub ttl: i64,
}

/// Asks for a token for user `name`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct AuthenticateRequest {
    /// The user.
    #[prost(string, tag = "1")]
    pub name: String,
    /// The password.
    #[prost(string, tag = "2")]
    pub password: String,
}

/// The token, sent as `token` metadata on later calls.
#[derive(Clone, PartialEq, prost::Message)]
pub struct AuthenticateResponse {
    /// Answering member and revision.
    #[prost(message, optional, tag = "1")]
    pub header: Option<ResponseHeader>,
    /// The token.
    #[prost(string, tag = "2")]
    pub token: String,
}

/// Lists the cluster's members.
#[derive(Clone, PartialEq, prost::Message)]
pub struct MemberListRequest {
    /// Read the list through Raft rather than from the answering member.
    #[prost(bool, tag = "1")]
    pub linearizable: bool,
}

/// One member of the cluster.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Member {
    /// Its id.
    #[prost(uint64, tag = "1")]
    pub id: u64,
    /// Its name; empty until it has started.
    #[prost(string, tag = "2")]
    pub name: String,
    /// Where its peers reach it.
    #[prost(string, repeated, tag = "3")]
    pub peer_urls: Vec<String>,
    /// Where clients reach it.
    #[prost(string, repeated, tag = "4")]
    pub client_urls: Vec<String>,
    /// A learner: it does not vote.
    #[prost(bool, tag = "5")]
    pub is_learner: bool,
}

/// The cluster's members.
#[derive(Clone, PartialEq, prost::Message)]
pub struct MemberListResponse {
    /// Answering member and revision.
    #[prost(message, optional, tag = "1")]
    pub header: Option<ResponseHeader>,
    /// The members.
    #[prost(message, repeated, tag = "2")]
    pub members: Vec<Member>,
}

/// Asks the answering member for its status.
#[derive(Clone, PartialEq, prost::Message)]
pub struct StatusRequest {}

/// The answering member's status.
#[derive(Clone, PartialEq, prost::Message)]
pub struct StatusResponse {
    /// Answering member and revision.
    #[prost(message, optional, tag = "1")]
    pub header: Option<ResponseHeader>,
    /// The server's version.
    #[prost(string, tag = "2")]
    pub version: String,
    /// The database's size in bytes.
    #[prost(int64, tag = "3")]
    pub db_size: i64,
    /// The leader's member id, as this member knows it.
    #[prost(uint64, tag = "4")]
    pub leader: u64,
    /// The member's Raft index.
    #[prost(uint64, tag = "5")]
    pub raft_index: u64,
    /// The member's Raft term.
    #[prost(uint64, tag = "6")]
    pub raft_term: u64,
    /// Alarms and errors the member reports.
    #[prost(string, repeated, tag = "8")]
    pub errors: Vec<String>,
    /// The member is a learner.
    #[prost(bool, tag = "10")]
    pub is_learner: bool,
}

// ------------------------------------------------------------------------------ v3lockpb

/// Takes the lock `name` with the server's `concurrency.Mutex` (what `etcdctl lock` runs),
/// waiting as long as it takes; the lock's key is bound to `lease`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct LockRequest {
    /// The lock's name (the prefix of its keys).
    #[prost(bytes = "vec", tag = "1")]
    pub name: Vec<u8>,
    /// The lease the lock's key is bound to (and named after).
    #[prost(int64, tag = "2")]
    pub lease: i64,
}

/// The lock taken.
#[derive(Clone, PartialEq, prost::Message)]
pub struct LockResponse {
    /// Answering member and revision.
    #[prost(message, optional, tag = "1")]
    pub header: Option<ResponseHeader>,
    /// The holder's key: what [`UnlockRequest`] takes.
    #[prost(bytes = "vec", tag = "2")]
    pub key: Vec<u8>,
}

/// Releases a lock by its holder's key.
#[derive(Clone, PartialEq, prost::Message)]
pub struct UnlockRequest {
    /// The key a [`LockResponse`] gave.
    #[prost(bytes = "vec", tag = "1")]
    pub key: Vec<u8>,
}

/// The answer to an [`UnlockRequest`].
#[derive(Clone, PartialEq, prost::Message)]
pub struct UnlockResponse {
    /// Answering member and revision.
    #[prost(message, optional, tag = "1")]
    pub header: Option<ResponseHeader>,
}
