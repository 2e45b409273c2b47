//! The etcd v3 messages leasehold sends and reads, declared by hand for prost (no build step).
//!
//! Field numbers follow etcd's `etcdserverpb`, `mvccpb` and `v3lockpb` packages. Only the
//! fields leasehold uses, or whose absence would change what a request means, are declared:
//! the server ignores none of them and prost skips fields in answers it does not know.
//! The store's client sends these; leasehold's own tools reach them as
//! `backends::etcd::tools::rpc` (feature `tools`), and `fence::etcd` takes types of its own.

mod admin;
pub use admin::*;

// ------------------------------------------------------------------------------- mvccpb

/// A key as stored, with its revisions.
#[derive(Clone, PartialEq, prost::Message)]
pub struct KeyValue {
    /// The key.
    #[prost(bytes = "vec", tag = "1")]
    pub key: Vec<u8>,
    /// The revision of the key's last creation (a delete and put creates it anew).
    #[prost(int64, tag = "2")]
    pub create_revision: i64,
    /// The revision of the key's last change.
    #[prost(int64, tag = "3")]
    pub mod_revision: i64,
    /// Changes since creation (1 when just created).
    #[prost(int64, tag = "4")]
    pub version: i64,
    /// The value (empty with `keys_only`).
    #[prost(bytes = "vec", tag = "5")]
    pub value: Vec<u8>,
    /// The lease the key is bound to; 0 for none.
    #[prost(int64, tag = "6")]
    pub lease: i64,
}

/// One change seen by a watch.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Event {
    /// [`EventType`] as its number.
    #[prost(enumeration = "EventType", tag = "1")]
    pub r#type: i32,
    /// The key after the change (only key and revisions for a delete).
    #[prost(message, optional, tag = "2")]
    pub kv: Option<KeyValue>,
    /// The key before the change, if the watch asked for it.
    #[prost(message, optional, tag = "3")]
    pub prev_kv: Option<KeyValue>,
}

/// What an [`Event`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
#[repr(i32)]
pub enum EventType {
    /// A put.
    Put = 0,
    /// A delete (or the key's lease ended).
    Delete = 1,
}

// ------------------------------------------------------------------------- etcdserverpb

/// Which member answered, and the store's revision when it did.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ResponseHeader {
    /// The cluster's id.
    #[prost(uint64, tag = "1")]
    pub cluster_id: u64,
    /// The answering member's id.
    #[prost(uint64, tag = "2")]
    pub member_id: u64,
    /// The key-value store's revision when the request was applied.
    #[prost(int64, tag = "3")]
    pub revision: i64,
    /// The member's Raft term.
    #[prost(uint64, tag = "4")]
    pub raft_term: u64,
}

/// Reads the key `key`, or the keys in `[key, range_end)` when `range_end` is set.
#[derive(Clone, PartialEq, prost::Message)]
pub struct RangeRequest {
    /// The key, or the first key of the range.
    #[prost(bytes = "vec", tag = "1")]
    pub key: Vec<u8>,
    /// The end of the range (exclusive); `[0]` means every key from `key` on.
    #[prost(bytes = "vec", tag = "2")]
    pub range_end: Vec<u8>,
    /// At most this many keys; 0 for no limit.
    #[prost(int64, tag = "3")]
    pub limit: i64,
    /// Read at this revision; 0 for the current one.
    #[prost(int64, tag = "4")]
    pub revision: i64,
    /// [`SortOrder`] as its number.
    #[prost(enumeration = "SortOrder", tag = "5")]
    pub sort_order: i32,
    /// [`SortTarget`] as its number.
    #[prost(enumeration = "SortTarget", tag = "6")]
    pub sort_target: i32,
    /// Answer from the member's local state, without a quorum read.
    #[prost(bool, tag = "7")]
    pub serializable: bool,
    /// Leave the values out.
    #[prost(bool, tag = "8")]
    pub keys_only: bool,
    /// Only count the keys.
    #[prost(bool, tag = "9")]
    pub count_only: bool,
    /// Only keys last changed at or after this revision; 0 for no bound.
    #[prost(int64, tag = "10")]
    pub min_mod_revision: i64,
    /// Only keys last changed at or before this revision; 0 for no bound.
    #[prost(int64, tag = "11")]
    pub max_mod_revision: i64,
    /// Only keys created at or after this revision; 0 for no bound.
    #[prost(int64, tag = "12")]
    pub min_create_revision: i64,
    /// Only keys created at or before this revision; 0 for no bound.
    #[prost(int64, tag = "13")]
    pub max_create_revision: i64,
}

/// How a [`RangeRequest`] sorts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
#[repr(i32)]
pub enum SortOrder {
    /// Unsorted (key order).
    None = 0,
    /// Lowest first.
    Ascend = 1,
    /// Highest first.
    Descend = 2,
}

/// What a [`RangeRequest`] sorts by.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
#[repr(i32)]
pub enum SortTarget {
    /// The key.
    Key = 0,
    /// The version.
    Version = 1,
    /// The create revision.
    Create = 2,
    /// The mod revision.
    Mod = 3,
    /// The value.
    Value = 4,
}

/// The keys a [`RangeRequest`] found.
#[derive(Clone, PartialEq, prost::Message)]
pub struct RangeResponse {
    /// Answering member and revision.
    #[prost(message, optional, tag = "1")]
    pub header: Option<ResponseHeader>,
    /// The keys, in the order asked for.
    #[prost(message, repeated, tag = "2")]
    pub kvs: Vec<KeyValue>,
    /// More keys matched than `limit` let through.
    #[prost(bool, tag = "3")]
    pub more: bool,
    /// How many keys matched.
    #[prost(int64, tag = "4")]
    pub count: i64,
}

/// Writes `value` to `key`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct PutRequest {
    /// The key.
    #[prost(bytes = "vec", tag = "1")]
    pub key: Vec<u8>,
    /// The value.
    #[prost(bytes = "vec", tag = "2")]
    pub value: Vec<u8>,
    /// Bind the key to this lease; 0 for none.
    #[prost(int64, tag = "3")]
    pub lease: i64,
    /// Answer with the key as it was before.
    #[prost(bool, tag = "4")]
    pub prev_kv: bool,
}

/// The answer to a [`PutRequest`].
#[derive(Clone, PartialEq, prost::Message)]
pub struct PutResponse {
    /// Answering member and revision.
    #[prost(message, optional, tag = "1")]
    pub header: Option<ResponseHeader>,
    /// The key before the put, if asked for and it existed.
    #[prost(message, optional, tag = "2")]
    pub prev_kv: Option<KeyValue>,
}

/// Deletes `key`, or the keys in `[key, range_end)` when `range_end` is set.
#[derive(Clone, PartialEq, prost::Message)]
pub struct DeleteRangeRequest {
    /// The key, or the first key of the range.
    #[prost(bytes = "vec", tag = "1")]
    pub key: Vec<u8>,
    /// The end of the range (exclusive).
    #[prost(bytes = "vec", tag = "2")]
    pub range_end: Vec<u8>,
    /// Answer with the deleted keys.
    #[prost(bool, tag = "3")]
    pub prev_kv: bool,
}

/// The answer to a [`DeleteRangeRequest`].
#[derive(Clone, PartialEq, prost::Message)]
pub struct DeleteRangeResponse {
    /// Answering member and revision.
    #[prost(message, optional, tag = "1")]
    pub header: Option<ResponseHeader>,
    /// How many keys were deleted.
    #[prost(int64, tag = "2")]
    pub deleted: i64,
    /// The deleted keys, if asked for.
    #[prost(message, repeated, tag = "3")]
    pub prev_kvs: Vec<KeyValue>,
}

/// One operation of a transaction branch.
#[derive(Clone, PartialEq, prost::Message)]
pub struct RequestOp {
    /// The operation; `None` is refused by the server.
    #[prost(oneof = "Request", tags = "1, 2, 3")]
    pub request: Option<Request>,
}

/// The operations a [`RequestOp`] can carry.
#[derive(Clone, PartialEq, prost::Oneof)]
pub enum Request {
    /// A read.
    #[prost(message, tag = "1")]
    Range(RangeRequest),
    /// A write.
    #[prost(message, tag = "2")]
    Put(PutRequest),
    /// A delete.
    #[prost(message, tag = "3")]
    DeleteRange(DeleteRangeRequest),
}

/// The answer to one [`RequestOp`], in the same place of the branch.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ResponseOp {
    /// The answer; `None` for a kind not declared here (a nested transaction).
    #[prost(oneof = "Response", tags = "1, 2, 3")]
    pub response: Option<Response>,
}

/// The answers a [`ResponseOp`] can carry.
#[derive(Clone, PartialEq, prost::Oneof)]
pub enum Response {
    /// A read's answer.
    #[prost(message, tag = "1")]
    Range(RangeResponse),
    /// A write's answer.
    #[prost(message, tag = "2")]
    Put(PutResponse),
    /// A delete's answer.
    #[prost(message, tag = "3")]
    DeleteRange(DeleteRangeResponse),
}

/// A transaction's condition: `target` of `key` (or of every key in the range) compared to
/// the value in `target_union`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Compare {
    /// [`CompareResult`] as its number.
    #[prost(enumeration = "CompareResult", tag = "1")]
    pub result: i32,
    /// [`CompareTarget`] as its number; must match `target_union`'s kind.
    #[prost(enumeration = "CompareTarget", tag = "2")]
    pub target: i32,
    /// The key compared.
    #[prost(bytes = "vec", tag = "3")]
    pub key: Vec<u8>,
    /// The value compared against.
    #[prost(oneof = "TargetUnion", tags = "4, 5, 6, 7, 8")]
    pub target_union: Option<TargetUnion>,
    /// Compare every key in `[key, range_end)` (all must pass); empty for `key` alone.
    #[prost(bytes = "vec", tag = "64")]
    pub range_end: Vec<u8>,
}

/// How a [`Compare`] compares (the key's value on the left).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
#[repr(i32)]
pub enum CompareResult {
    /// Equal.
    Equal = 0,
    /// Greater.
    Greater = 1,
    /// Less.
    Less = 2,
    /// Not equal.
    NotEqual = 3,
}

/// What of a key a [`Compare`] looks at.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
#[repr(i32)]
pub enum CompareTarget {
    /// The version.
    Version = 0,
    /// The create revision (0 for an absent key).
    Create = 1,
    /// The mod revision.
    Mod = 2,
    /// The value.
    Value = 3,
    /// The lease.
    Lease = 4,
}

/// The right-hand side of a [`Compare`].
#[derive(Clone, PartialEq, prost::Oneof)]
pub enum TargetUnion {
    /// A version.
    #[prost(int64, tag = "4")]
    Version(i64),
    /// A create revision.
    #[prost(int64, tag = "5")]
    CreateRevision(i64),
    /// A mod revision.
    #[prost(int64, tag = "6")]
    ModRevision(i64),
    /// A value.
    #[prost(bytes = "vec", tag = "7")]
    Value(Vec<u8>),
    /// A lease id.
    #[prost(int64, tag = "8")]
    Lease(i64),
}

/// Runs `success` if every comparison holds, `failure` otherwise, atomically.
#[derive(Clone, PartialEq, prost::Message)]
pub struct TxnRequest {
    /// The conditions (all must hold).
    #[prost(message, repeated, tag = "1")]
    pub compare: Vec<Compare>,
    /// Run when they do.
    #[prost(message, repeated, tag = "2")]
    pub success: Vec<RequestOp>,
    /// Run when they do not.
    #[prost(message, repeated, tag = "3")]
    pub failure: Vec<RequestOp>,
}

/// The answer to a [`TxnRequest`].
#[derive(Clone, PartialEq, prost::Message)]
pub struct TxnResponse {
    /// Answering member and revision.
    #[prost(message, optional, tag = "1")]
    pub header: Option<ResponseHeader>,
    /// Whether the conditions held (and `success` ran).
    #[prost(bool, tag = "2")]
    pub succeeded: bool,
    /// One answer for each operation of the branch that ran.
    #[prost(message, repeated, tag = "3")]
    pub responses: Vec<ResponseOp>,
}

/// One message on a watch stream.
#[derive(Clone, PartialEq, prost::Message)]
pub struct WatchRequest {
    /// What it asks.
    #[prost(oneof = "WatchRequestUnion", tags = "1, 2")]
    pub request_union: Option<WatchRequestUnion>,
}

/// What a [`WatchRequest`] asks.
#[derive(Clone, PartialEq, prost::Oneof)]
pub enum WatchRequestUnion {
    /// Start a watch.
    #[prost(message, tag = "1")]
    CreateRequest(WatchCreateRequest),
    /// Stop one.
    #[prost(message, tag = "2")]
    CancelRequest(WatchCancelRequest),
}

/// Starts watching `key`, or the keys in `[key, range_end)`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct WatchCreateRequest {
    /// The key, or the first key of the range.
    #[prost(bytes = "vec", tag = "1")]
    pub key: Vec<u8>,
    /// The end of the range (exclusive).
    #[prost(bytes = "vec", tag = "2")]
    pub range_end: Vec<u8>,
    /// Replay changes from this revision on; 0 for changes after the current one.
    #[prost(int64, tag = "3")]
    pub start_revision: i64,
    /// Ask for periodic empty answers carrying the current revision.
    #[prost(bool, tag = "4")]
    pub progress_notify: bool,
    /// [`FilterType`]s as numbers: the kinds of event not to send.
    #[prost(enumeration = "FilterType", repeated, tag = "5")]
    pub filters: Vec<i32>,
    /// Send each event's previous key too.
    #[prost(bool, tag = "6")]
    pub prev_kv: bool,
}

/// An event kind a watch leaves out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
#[repr(i32)]
pub enum FilterType {
    /// Puts.
    Noput = 0,
    /// Deletes.
    Nodelete = 1,
}

/// Stops the watch `watch_id`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct WatchCancelRequest {
    /// The watch.
    #[prost(int64, tag = "1")]
    pub watch_id: i64,
}

/// One message from a watch stream: a creation or cancellation, or events.
#[derive(Clone, PartialEq, prost::Message)]
pub struct WatchResponse {
    /// Answering member and revision.
    #[prost(message, optional, tag = "1")]
    pub header: Option<ResponseHeader>,
    /// The watch this is about.
    #[prost(int64, tag = "2")]
    pub watch_id: i64,
    /// The answer to a create request.
    #[prost(bool, tag = "3")]
    pub created: bool,
    /// The watch was stopped (asked for, compacted away, or refused).
    #[prost(bool, tag = "4")]
    pub canceled: bool,
    /// The start revision asked for was compacted; the oldest one left.
    #[prost(int64, tag = "5")]
    pub compact_revision: i64,
    /// Why the watch was stopped.
    #[prost(string, tag = "6")]
    pub cancel_reason: String,
    /// The events, in revision order.
    #[prost(message, repeated, tag = "11")]
    pub events: Vec<Event>,
}

// ------------------------------------------------------------------------------ builders

/// The end of the range holding every key that starts with `prefix` (`[0]`, no end, when
/// none can follow it).
pub fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    match prefix.iter().rposition(|b| *b < 0xff) {
        Some(i) => {
            let mut end = prefix[..=i].to_vec();
            end[i] += 1;
            end
        }
        None => vec![0],
    }
}

impl RangeRequest {
    /// Reads `key` alone.
    pub fn key(key: impl Into<Vec<u8>>) -> Self {
        RangeRequest { key: key.into(), ..Default::default() }
    }

    /// Reads every key that starts with `prefix`.
    pub fn prefix(prefix: impl Into<Vec<u8>>) -> Self {
        let key = prefix.into();
        RangeRequest { range_end: prefix_end(&key), key, ..Default::default() }
    }

    /// Reads every key.
    pub fn all() -> Self {
        RangeRequest { key: vec![0], range_end: vec![0], ..Default::default() }
    }

    /// Sorted by `target`, in `order`.
    pub fn sorted(self, target: SortTarget, order: SortOrder) -> Self {
        RangeRequest { sort_target: target as i32, sort_order: order as i32, ..self }
    }
}

impl Compare {
    /// `key`'s create revision (0 when absent) compared to `rev`.
    pub fn create_revision(key: impl Into<Vec<u8>>, result: CompareResult, rev: i64) -> Self {
        Compare {
            result: result as i32,
            target: CompareTarget::Create as i32,
            key: key.into(),
            target_union: Some(TargetUnion::CreateRevision(rev)),
            range_end: Vec::new(),
        }
    }

    /// `key`'s value compared to `value`.
    pub fn value(
        key: impl Into<Vec<u8>>,
        result: CompareResult,
        value: impl Into<Vec<u8>>,
    ) -> Self {
        Compare {
            result: result as i32,
            target: CompareTarget::Value as i32,
            key: key.into(),
            target_union: Some(TargetUnion::Value(value.into())),
            range_end: Vec::new(),
        }
    }

    /// Compares every key that starts with this key instead.
    pub fn with_prefix(self) -> Self {
        Compare { range_end: prefix_end(&self.key), ..self }
    }
}

impl RequestOp {
    /// A read.
    pub fn range(r: RangeRequest) -> Self {
        RequestOp { request: Some(Request::Range(r)) }
    }

    /// A put of `value` to `key`, bound to `lease` (0 for none).
    pub fn put(key: impl Into<Vec<u8>>, value: impl Into<Vec<u8>>, lease: i64) -> Self {
        let put = PutRequest { key: key.into(), value: value.into(), lease, prev_kv: false };
        RequestOp { request: Some(Request::Put(put)) }
    }

    /// A delete of `key` alone.
    pub fn delete(key: impl Into<Vec<u8>>) -> Self {
        let del = DeleteRangeRequest { key: key.into(), ..Default::default() };
        RequestOp { request: Some(Request::DeleteRange(del)) }
    }
}

impl ResponseOp {
    /// The read's answer, if this answers a read.
    pub fn range(&self) -> Option<&RangeResponse> {
        match &self.response {
            Some(Response::Range(r)) => Some(r),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;

    #[test]
    fn prefix_end_increments_the_last_byte_below_ff() {
        assert_eq!(prefix_end(b"a/"), b"a0");
        assert_eq!(prefix_end(&[b'a', 0xff, 0xff]), b"b");
        assert_eq!(prefix_end(&[0xff]), [0]);
        assert_eq!(prefix_end(b""), [0]);
    }

    #[test]
    fn messages_use_etcd_field_numbers() {
        // Compare: result 1, target 2, key 3, create_revision 5, range_end 64 (two-byte tag).
        let c = Compare::create_revision("k", CompareResult::Equal, 7).with_prefix();
        assert_eq!(c.encode_to_vec(), [0x10, 1, 0x1a, 1, b'k', 0x28, 7, 0x82, 0x04, 1, b'l']);
        // A put inside a RequestOp is field 2; lease is field 3.
        let op = RequestOp::put("k", "v", 5);
        assert_eq!(op.encode_to_vec(), [0x12, 8, 0x0a, 1, b'k', 0x12, 1, b'v', 0x18, 5]);
        // Watch filters are packed (field 5, wire type 2).
        let w =
            WatchCreateRequest { filters: vec![FilterType::Noput as i32], ..Default::default() };
        assert_eq!(w.encode_to_vec(), [0x2a, 1, 0]);
    }
}
