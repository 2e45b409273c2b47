//! Redis's baselines for `leasehold bench`: the raw redis-rs client sending the same round
//! trips as leasehold's store (a plain `SET NX PX` with a compare-and-delete script, and
//! leasehold's own grant and release scripts), `redis-benchmark` for the server's ceiling, and
//! what the bench reads of the server (`INFO server`'s version, `INFO commandstats`'s
//! request counts and server time, `PTTL` of lease keys).

use std::sync::Arc;
use std::time::Duration;

use leasehold::backends::redis::tools;
use leasehold::{OwnerToken, StoreUrl};
use redis::aio::{ConnectionLike, ConnectionManager};

use crate::baseline::{
    Baseline, Paired, RawClient, RawError, RawHeld, RequestLoad, Requests, ServerView,
};

/// The lease length the raw clients ask for (the bench's).
pub(crate) const TTL: Duration = Duration::from_secs(30);

/// Every request leasehold's Redis stores send, by `INFO commandstats` name: what one server
/// gets ([`LEASEHOLD_REQUESTS`]), then what a Cluster gets beside it ([`SHARD_REQUESTS`]).
pub const ALL_REQUESTS: &[&str] = &[
    "evalsha",
    "eval",
    "evalsha_ro",
    "eval_ro",
    "subscribe",
    "unsubscribe",
    "script|load",
    "ping",
    "ssubscribe",
    "sunsubscribe",
];

/// What leasehold sends to Redis, by `INFO commandstats` name: scripts and (un)subscriptions.
pub const LEASEHOLD_REQUESTS: &[&str] = ALL_REQUESTS.split_at(8).0;

/// The raw client's compare-and-delete (plain mode).
const RAW_RELEASE: &str = r"
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0";

pub(crate) fn err(e: impl std::fmt::Display) -> RawError {
    e.to_string()
}

/// Raw redis-rs: plain `SET NX PX`, then EVALSHA compare-and-delete (one attempt only). With
/// `fenced`, the two scripts leasehold sends instead, with the same keys and arguments: the
/// grant (SET NX PX, the holder info, the fence counter) and the release (compare-and-delete
/// of lease and holder info, its tombstone, PUBLISH), so the pairing isolates what the client
/// side costs. `C` is the connection: one server's, or redis-rs's cluster connection (routed
/// by key slot).
pub struct Raw<C> {
    conn: C,
    fenced: bool,
    grant: redis::Script,
    release: redis::Script,
    /// The holder info line a locker keeps beside each grant (fenced mode sends it too).
    info: String,
    /// The release's publishing command (`SPUBLISH` on a cluster, as the store sends).
    publish: &'static str,
}

impl<C> Raw<C> {
    /// On connection `conn`, releases publishing with `publish`.
    pub fn on(conn: C, fenced: bool, publish: &'static str) -> Self {
        // leasehold's own script texts, so the pairing stays exact if they change.
        let (lh_grant, lh_release) = tools::scripts();
        Raw {
            conn,
            fenced,
            grant: redis::Script::new(lh_grant),
            release: redis::Script::new(if fenced { lh_release } else { RAW_RELEASE }),
            info: leasehold::HolderInfo::this_process().encode(),
            publish,
        }
    }
}

/// A key a [`Raw`] holds: its name and owner.
struct Held<C>(Arc<Raw<C>>, String, String);

#[async_trait::async_trait]
impl<C> RawClient for Arc<Raw<C>>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    async fn acquire(&self, key: &str) -> Result<Option<Box<dyn RawHeld>>, RawError> {
        let mut c = self.conn.clone();
        let owner = OwnerToken::generate().map_err(err)?.to_string();
        let granted = if self.fenced {
            let mut inv = self.grant.prepare_invoke();
            let ttl = TTL.as_millis() as u64;
            tools::grant_args(&mut inv, key, &owner, ttl, &self.info);
            let (ok, _fence): (i64, i64) = inv.invoke_async(&mut c).await.map_err(err)?;
            ok == 1
        } else {
            let ok: Option<String> = redis::cmd("SET")
                .arg(key)
                .arg(&owner)
                .arg("NX")
                .arg("PX")
                .arg(TTL.as_millis() as u64)
                .query_async(&mut c)
                .await
                .map_err(err)?;
            ok.is_some()
        };
        Ok(granted.then(|| Box::new(Held(self.clone(), key.to_owned(), owner)) as Box<dyn RawHeld>))
    }
}

#[async_trait::async_trait]
impl<C> RawHeld for Held<C>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    async fn release(self: Box<Self>) -> Result<(), RawError> {
        let Held(raw, key, owner) = *self;
        let mut c = raw.conn.clone();
        let mut inv = raw.release.prepare_invoke();
        if raw.fenced {
            tools::release_args(&mut inv, &key, &owner, raw.publish);
        } else {
            inv.key(&key).arg(&owner);
        }
        let deleted: i64 = inv.invoke_async(&mut c).await.map_err(err)?;
        if deleted != 0 { Ok(()) } else { Err("raw release found the key not ours".into()) }
    }
}

/// A connection manager to the server `url` names, as the store's driver connects.
async fn manager(url: &StoreUrl) -> Result<ConnectionManager, String> {
    let client = tools::client(url).map_err(err)?;
    client.get_connection_manager().await.map_err(err)
}

/// The two raw clients on one connection manager, labelled `plain` and `fenced`.
fn raw_pair(conn: ConnectionManager, plain: &'static str, fenced: &'static str) -> Vec<Baseline> {
    vec![
        Baseline {
            label: plain,
            paired: Paired::Headline,
            ratio_name: Some("raw redis-rs (SET NX PX + compare-and-delete)"),
            client: Arc::new(Arc::new(Raw::on(conn.clone(), false, "PUBLISH"))),
        },
        Baseline {
            label: fenced,
            paired: Paired::SameRequests,
            ratio_name: Some("raw redis-rs sending leasehold's scripts"),
            client: Arc::new(Arc::new(Raw::on(conn, true, "PUBLISH"))),
        },
    ]
}

/// The uncontended scenario's raw clients.
pub async fn baselines(url: &StoreUrl) -> Result<Vec<Baseline>, String> {
    Ok(raw_pair(
        manager(url).await?,
        "raw redis-rs: SET NX PX + EVALSHA compare-and-delete, same connection kind",
        "raw redis-rs sending leasehold's two scripts: fenced grant (SET NX PX + INCR), release (compare-and-delete + PUBLISH)",
    ))
}

/// The many-keys scenario's raw clients: one connection manager shared by every task.
pub async fn many_keys_baselines(url: &StoreUrl) -> Result<Vec<Baseline>, String> {
    Ok(raw_pair(
        manager(url).await?,
        "raw redis-rs: SET NX PX + EVALSHA compare-and-delete, 64 tasks on one connection manager",
        "raw redis-rs sending leasehold's two scripts (fenced grant, release + PUBLISH), 64 tasks on one connection manager",
    ))
}

/// Calls of the named commands on the node `c` is connected to so far and the server time
/// they took, in µs (`INFO commandstats`).
pub async fn command_stats(
    c: &mut impl ConnectionLike,
    names: &[&str],
) -> Result<Requests, RawError> {
    let info: String = redis::cmd("INFO").arg("commandstats").query_async(c).await.map_err(err)?;
    Ok(count(&info, names))
}

/// The calls and µs of the named commands in the text of `INFO commandstats`
/// (`cmdstat_NAME:calls=N,usec=N,…` lines); a line or a figure it cannot read counts none.
fn count(info: &str, names: &[&str]) -> Requests {
    let mut r = Requests::default();
    for line in info.lines() {
        let Some(rest) = line.strip_prefix("cmdstat_") else { continue };
        let Some((name, stats)) = rest.split_once(':') else { continue };
        if names.contains(&name) {
            for kv in stats.split(',') {
                if let Some(v) = kv.strip_prefix("calls=") {
                    r.calls += v.trim().parse::<u64>().unwrap_or(0);
                } else if let Some(v) = kv.strip_prefix("usec=") {
                    r.usec += v.trim().parse::<u64>().unwrap_or(0);
                }
            }
        }
    }
    r
}

/// One Redis server as the bench reads it, on connection `C`.
pub(crate) struct View<C> {
    pub(crate) conn: C,
    /// The store's URL (its `prefix` option names the keys).
    pub(crate) store: StoreUrl,
}

/// The server `url` names, connected.
pub async fn server_view(url: &StoreUrl) -> Result<Arc<dyn ServerView>, String> {
    Ok(Arc::new(View { conn: manager(url).await?, store: url.clone() }))
}

#[async_trait::async_trait]
impl<C> ServerView for View<C>
where
    C: ConnectionLike + Clone + Send + Sync + 'static,
{
    async fn version(&self) -> String {
        let mut c = self.conn.clone();
        let info: String =
            redis::cmd("INFO").arg("server").query_async(&mut c).await.unwrap_or_default();
        info.lines()
            .find_map(|l| l.strip_prefix("redis_version:"))
            .unwrap_or("?")
            .trim()
            .to_string()
    }

    fn counter(&self) -> &'static str {
        "INFO commandstats"
    }

    async fn requests(&self, names: &[&str]) -> Result<Requests, RawError> {
        command_stats(&mut self.conn.clone(), names).await
    }

    fn leasehold_requests(&self) -> &'static [&'static str] {
        LEASEHOLD_REQUESTS
    }

    /// A grant and a release are each one EVALSHA.
    fn leasehold_timed(&self) -> &'static [&'static str] {
        &["evalsha"]
    }

    /// The plain raw client's grant: a bare SET.
    fn headline_timed(&self) -> &'static [&'static str] {
        &["set"]
    }

    fn timed_words(&self) -> [&'static str; 2] {
        ["EVALSHA (grant or release)", "bare SET"]
    }

    /// `PTTL` of each key's lease key (the store's layout: prefix, key in braces), in one
    /// pipelined round trip.
    async fn lease_ms_left(&self, keys: &[&str]) -> Result<Option<Vec<i64>>, RawError> {
        let mut pipe = redis::pipe();
        for k in keys {
            let key = leasehold::Key::new(*k).map_err(err)?;
            pipe.cmd("PTTL").arg(tools::key_names(&self.store, &key).map_err(err)?.lease);
        }
        let mut c = self.conn.clone();
        pipe.query_async(&mut c).await.map(Some).map_err(err)
    }
}

/// `redis-benchmark` doing `SET … NX PX` with 50 clients and 16-deep pipelines against one
/// server, or with `cluster` every master of a Cluster through one of them (its `{tag}` keys
/// spread over the masters).
pub struct RedisBenchmark {
    /// `host:port` of the server (a master, with `cluster`).
    pub host: String,
    /// Its port.
    pub port: u16,
    /// Run with `--cluster`.
    pub cluster: bool,
}

/// What leasehold's store sends to a Cluster beside [`LEASEHOLD_REQUESTS`]: sharded
/// subscriptions.
pub const SHARD_REQUESTS: &[&str] = ALL_REQUESTS.split_at(8).1;

/// `redis-benchmark` on the server `url` names (a TCP address; a socket is refused).
pub fn request_load(url: &StoreUrl) -> Result<Arc<dyn RequestLoad>, String> {
    let client = tools::client(url).map_err(err)?;
    match client.get_connection_info().addr() {
        redis::ConnectionAddr::Tcp(h, p) => {
            Ok(Arc::new(RedisBenchmark { host: h.clone(), port: *p, cluster: false }))
        }
        other => Err(format!("unsupported redis address {other:?}")),
    }
}

impl RedisBenchmark {
    /// `n` requests; requests per second.
    async fn rps(&self, n: u64) -> Result<f64, RawError> {
        let key =
            if self.cluster { "bench:rb:{tag}:__rand_int__" } else { "bench:rb:__rand_int__" };
        let port = self.port.to_string();
        let out = tokio::process::Command::new("redis-benchmark")
            .args(self.cluster.then_some("--cluster"))
            .args(["-h", &self.host, "-p", &port, "-c", "50", "-P", "16", "-r", "1000000"])
            .args(["-n", &n.to_string(), "-q", "SET", key, "v", "NX", "PX", "30000"])
            .kill_on_drop(true)
            .output()
            .await
            .map_err(|e| format!("cannot run redis-benchmark (package redis-tools): {e}"))?;
        let text = String::from_utf8_lossy(&out.stdout);
        // The last line with "requests per second" holds the final figure.
        text.split(['\r', '\n'])
            .rfind(|l| l.contains("requests per second"))
            .and_then(|l| l.split(" requests per second").next())
            .and_then(|l| l.split_whitespace().next_back())
            .and_then(|n| n.parse().ok())
            .ok_or_else(|| format!("cannot read redis-benchmark output: {text}"))
    }
}

#[async_trait::async_trait]
impl RequestLoad for RedisBenchmark {
    fn name(&self) -> &'static str {
        "redis-benchmark"
    }

    fn command(&self) -> &'static str {
        if self.cluster {
            "redis-benchmark --cluster -c 50 -P 16 -r 1000000 SET bench:rb:{tag}:__rand_int__ v NX PX 30000"
        } else {
            "redis-benchmark -c 50 -P 16 -r 1000000 SET bench:rb:__rand_int__ v NX PX 30000"
        }
    }

    /// Sized from a short probe so that the run lasts about `d` (100 000 to 50 million
    /// requests).
    async fn requests_per_s(&self, d: Duration) -> Result<f64, RawError> {
        let probe = self.rps(100_000).await?;
        let n = ((probe * d.as_secs_f64()) as u64).clamp(100_000, 50_000_000);
        self.rps(n).await
    }
}

#[cfg(test)]
mod tests {
    use super::count;
    use crate::baseline::Requests;

    /// Only the named commands count, subcommands by their `a|b` names, and a garbled line
    /// or figure counts none.
    #[test]
    fn commandstats_counts_the_named_requests() {
        let info = "# Commandstats\r\n\
            cmdstat_evalsha:calls=10,usec=200,usec_per_call=20.00,rejected_calls=0,failed_calls=0\r\n\
            cmdstat_set:calls=7,usec=14,usec_per_call=2.00\r\n\
            cmdstat_script|load:calls=2,usec=30,usec_per_call=15.00\r\n\
            cmdstat_eval:calls=x,usec=5\r\n\
            cmdstat_ping\r\n";
        assert_eq!(
            count(info, &["evalsha", "script|load", "eval"]),
            Requests { calls: 12, usec: 235 }
        );
        assert_eq!(count(info, &["set"]), Requests { calls: 7, usec: 14 });
        assert_eq!(count(info, &["get"]), Requests::default());
        let (before, after) = (Requests { calls: 5, usec: 9 }, Requests { calls: 3, usec: 20 });
        assert_eq!(after.since(before), Requests { calls: 0, usec: 11 });
    }
}
