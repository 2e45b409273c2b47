//! leasehold's own minimal etcd v3 client: the calls the etcd store makes, over one tonic
//! channel balanced across all endpoints.
//!
//! Public (and hidden from the docs) only so that leasehold's CLI tool can send raw etcd
//! requests next to the store's (the `bench` baselines, `doctor`'s member list) and the test
//! kit can read and write plain keys. It is not a general etcd client and has no stability
//! promise.

use std::time::Duration;

use http::uri::PathAndQuery;
use tokio::sync::mpsc;
use tonic::client::Grpc;
use tonic::metadata::AsciiMetadataValue;
use tonic::transport::{Channel, Endpoint};
use tonic_prost::ProstCodec;

use super::rpc::*;

/// Why a call failed.
#[derive(Debug)]
pub enum Error {
    /// The call's gRPC status, from the server or from the transport.
    Status(tonic::Status),
    /// The channel refused to take the request: nothing was sent.
    NotSent(String),
    /// A stream opened to keep a lease alive found it gone.
    LeaseNotFound(i64),
    /// The server ended a stream.
    StreamEnded(&'static str),
    /// An endpoint URL or credential that cannot be used.
    Invalid(String),
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Error::Status(s) => write!(f, "gRPC status {:?}: {}", s.code(), s.message()),
            Error::NotSent(m) => write!(f, "request not sent: {m}"),
            Error::LeaseNotFound(id) => write!(f, "lease {id:x} not found"),
            Error::StreamEnded(what) => write!(f, "the server ended the {what} stream"),
            Error::Invalid(m) => f.write_str(m),
        }
    }
}

/// No source: the message already carries the status's code and message.
impl std::error::Error for Error {}

impl From<tonic::Status> for Error {
    fn from(s: tonic::Status) -> Self {
        Error::Status(s)
    }
}

impl Error {
    /// Whether the request provably reached no member (no connection could be made, or the
    /// channel refused it), so sending it again cannot apply it twice.
    pub fn not_sent(&self) -> bool {
        match self {
            Error::Status(s) => {
                s.code() == tonic::Code::Unavailable && s.message().contains("connect")
            }
            Error::NotSent(_) => true,
            _ => false,
        }
    }
}

/// The result of a call.
pub type Result<T> = std::result::Result<T, Error>;

/// How [`Client::connect`] connects.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// User and password: the client authenticates once and sends the token on every call.
    pub user: Option<(String, String)>,
    /// Bound on opening one connection.
    pub connect_timeout: Option<Duration>,
    /// HTTP/2 ping interval and the wait for its answer, idle connections included.
    pub keep_alive: Option<(Duration, Duration)>,
    /// Sends `hasleader`: a member cut off from the leader refuses instead of answering.
    pub require_leader: bool,
}

/// A handle on the cluster; clones share the connections.
#[derive(Clone)]
pub struct Client {
    grpc: Grpc<Channel>,
    token: Option<AsciiMetadataValue>,
    require_leader: bool,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client").field("authenticated", &self.token.is_some()).finish()
    }
}

/// A bidirectional stream: requests go out through [`BidiStream::send`], answers come in
/// through [`BidiStream::message`]. Dropping it closes the stream.
#[derive(Debug)]
pub struct BidiStream<Q, A> {
    tx: mpsc::Sender<Q>,
    rx: tonic::Streaming<A>,
}

impl<Q, A> BidiStream<Q, A> {
    /// Queues `msg` for sending.
    pub async fn send(&self, msg: Q) -> Result<()> {
        self.tx.send(msg).await.map_err(|_| Error::StreamEnded("request"))
    }

    /// The next answer; `None` when the server ended the stream.
    pub async fn message(&mut self) -> Result<Option<A>> {
        Ok(self.rx.message().await?)
    }
}

const KV_RANGE: &str = "/etcdserverpb.KV/Range";
const KV_PUT: &str = "/etcdserverpb.KV/Put";
const KV_DELETE_RANGE: &str = "/etcdserverpb.KV/DeleteRange";
const KV_TXN: &str = "/etcdserverpb.KV/Txn";
const WATCH: &str = "/etcdserverpb.Watch/Watch";
const LEASE_GRANT: &str = "/etcdserverpb.Lease/LeaseGrant";
const LEASE_REVOKE: &str = "/etcdserverpb.Lease/LeaseRevoke";
const LEASE_KEEP_ALIVE: &str = "/etcdserverpb.Lease/LeaseKeepAlive";
const AUTHENTICATE: &str = "/etcdserverpb.Auth/Authenticate";
const MEMBER_LIST: &str = "/etcdserverpb.Cluster/MemberList";
const STATUS: &str = "/etcdserverpb.Maintenance/Status";
const LOCK: &str = "/v3lockpb.Lock/Lock";
const UNLOCK: &str = "/v3lockpb.Lock/Unlock";

impl Client {
    /// A client over `endpoints` (`http://HOST:PORT`). Connections open lazily, at the first
    /// call, except that credentials are checked at once (`Authenticate`).
    pub async fn connect(endpoints: &[String], opts: &Options) -> Result<Client> {
        let mut list = Vec::with_capacity(endpoints.len());
        for url in endpoints {
            let mut ep = Endpoint::from_shared(url.clone())
                .map_err(|e| Error::Invalid(format!("etcd endpoint {url:?}: {e}")))?;
            if let Some(t) = opts.connect_timeout {
                ep = ep.connect_timeout(t);
            }
            if let Some((interval, timeout)) = opts.keep_alive {
                ep = ep
                    .http2_keep_alive_interval(interval)
                    .keep_alive_timeout(timeout)
                    .keep_alive_while_idle(true);
            }
            list.push(ep);
        }
        if list.is_empty() {
            return Err(Error::Invalid("no etcd endpoint".into()));
        }
        let mut client = Client {
            grpc: Grpc::new(Channel::balance_list(list.into_iter())),
            token: None,
            require_leader: opts.require_leader,
        };
        if let Some((name, password)) = &opts.user {
            let req = AuthenticateRequest { name: name.clone(), password: password.clone() };
            let r: AuthenticateResponse = client.unary(AUTHENTICATE, req).await?;
            let token = r
                .token
                .parse()
                .map_err(|_| Error::Invalid("etcd sent an auth token that is not ASCII".into()))?;
            client.token = Some(token);
        }
        Ok(client)
    }

    fn request<T>(&self, msg: T) -> tonic::Request<T> {
        let mut r = tonic::Request::new(msg);
        let md = r.metadata_mut();
        if self.require_leader {
            md.insert("hasleader", AsciiMetadataValue::from_static("true"));
        }
        if let Some(t) = &self.token {
            md.insert("token", t.clone());
        }
        r
    }

    async fn unary<Q, A>(&self, path: &'static str, msg: Q) -> Result<A>
    where
        Q: prost::Message + Send + Sync + 'static,
        A: prost::Message + Default + Send + Sync + 'static,
    {
        let mut grpc = self.grpc.clone();
        grpc.ready().await.map_err(|e| Error::NotSent(e.to_string()))?;
        let path = PathAndQuery::from_static(path);
        Ok(grpc.unary(self.request(msg), path, ProstCodec::default()).await?.into_inner())
    }

    /// Opens a bidirectional stream whose first request is `first`.
    async fn bidi<Q, A>(&self, path: &'static str, first: Q) -> Result<BidiStream<Q, A>>
    where
        Q: prost::Message + Send + Sync + 'static,
        A: prost::Message + Default + Send + Sync + 'static,
    {
        let (tx, rx) = mpsc::channel(16);
        tx.send(first).await.map_err(|_| Error::StreamEnded("request"))?;
        let out =
            futures_util::stream::unfold(
                rx,
                |mut rx| async move { rx.recv().await.map(|m| (m, rx)) },
            );
        let mut grpc = self.grpc.clone();
        grpc.ready().await.map_err(|e| Error::NotSent(e.to_string()))?;
        let path = PathAndQuery::from_static(path);
        let rx = grpc.streaming(self.request(out), path, ProstCodec::default()).await?;
        Ok(BidiStream { tx, rx: rx.into_inner() })
    }

    /// `KV.Range`.
    pub async fn range(&self, req: RangeRequest) -> Result<RangeResponse> {
        self.unary(KV_RANGE, req).await
    }

    /// `KV.Put`.
    pub async fn put(&self, req: PutRequest) -> Result<PutResponse> {
        self.unary(KV_PUT, req).await
    }

    /// `KV.DeleteRange`.
    pub async fn delete_range(&self, req: DeleteRangeRequest) -> Result<DeleteRangeResponse> {
        self.unary(KV_DELETE_RANGE, req).await
    }

    /// `KV.Txn`.
    pub async fn txn(&self, req: TxnRequest) -> Result<TxnResponse> {
        self.unary(KV_TXN, req).await
    }

    /// `Lease.LeaseGrant` of `ttl` seconds, id chosen by the server.
    pub async fn lease_grant(&self, ttl: i64) -> Result<LeaseGrantResponse> {
        self.unary(LEASE_GRANT, LeaseGrantRequest { ttl, id: 0 }).await
    }

    /// `Lease.LeaseRevoke`.
    pub async fn lease_revoke(&self, id: i64) -> Result<LeaseRevokeResponse> {
        self.unary(LEASE_REVOKE, LeaseRevokeRequest { id }).await
    }

    /// Opens a `Lease.LeaseKeepAlive` stream for lease `id`: sends the first keepalive and
    /// reads its answer ([`Error::LeaseNotFound`] when the lease is gone).
    pub async fn lease_keep_alive(
        &self,
        id: i64,
    ) -> Result<(BidiStream<LeaseKeepAliveRequest, LeaseKeepAliveResponse>, LeaseKeepAliveResponse)>
    {
        let mut s: BidiStream<_, LeaseKeepAliveResponse> =
            self.bidi(LEASE_KEEP_ALIVE, LeaseKeepAliveRequest { id }).await?;
        match s.message().await? {
            Some(r) if r.ttl > 0 => Ok((s, r)),
            Some(_) => Err(Error::LeaseNotFound(id)),
            None => Err(Error::StreamEnded("lease keepalive")),
        }
    }

    /// Opens a `Watch.Watch` stream with one watch, `req`; its first answer says `created`.
    pub async fn watch(
        &self,
        req: WatchCreateRequest,
    ) -> Result<BidiStream<WatchRequest, WatchResponse>> {
        let first = WatchRequest { request_union: Some(WatchRequestUnion::CreateRequest(req)) };
        self.bidi(WATCH, first).await
    }

    /// `Cluster.MemberList`, as the answering member knows it.
    pub async fn member_list(&self) -> Result<MemberListResponse> {
        self.unary(MEMBER_LIST, MemberListRequest { linearizable: false }).await
    }

    /// `Maintenance.Status` of the answering member.
    pub async fn status(&self) -> Result<StatusResponse> {
        self.unary(STATUS, StatusRequest {}).await
    }

    /// `Lock.Lock`: waits until the server's `concurrency.Mutex` grants `name`.
    pub async fn lock(&self, name: impl Into<Vec<u8>>, lease: i64) -> Result<LockResponse> {
        self.unary(LOCK, LockRequest { name: name.into(), lease }).await
    }

    /// `Lock.Unlock` of the key a [`Client::lock`] answered.
    pub async fn unlock(&self, key: impl Into<Vec<u8>>) -> Result<UnlockResponse> {
        self.unary(UNLOCK, UnlockRequest { key: key.into() }).await
    }
}
