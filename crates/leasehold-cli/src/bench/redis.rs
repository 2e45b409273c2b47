//! The Redis baselines: the raw redis-rs client sending the same round trips (plain `SET NX PX`, and leasehold's own scripts), `redis-benchmark`, the server's command statistics, and the peer crate (rslock).

use super::{BenchResult, Contender, TTL};
use leasehold::OwnerToken;
use std::sync::Arc;
use std::time::Duration;

/// What a Redis URL points at, for baselines.
pub(super) struct RedisSide {
    #[cfg_attr(not(feature = "peers"), allow(dead_code))]
    pub(super) url: String,
    host: String,
    port: u16,
    /// The store's URL (its `prefix` option names the keys).
    store: leasehold::StoreUrl,
    conn: ::redis::aio::ConnectionManager,
}

impl RedisSide {
    pub(super) async fn connect(store: &leasehold::StoreUrl) -> BenchResult<Self> {
        use leasehold::backends::redis::tools;
        let client = tools::client(store).map_err(|e| e.to_string())?;
        let info = client.get_connection_info();
        let (host, port) = match info.addr() {
            ::redis::ConnectionAddr::Tcp(h, p) => (h.clone(), *p),
            other => return Err(format!("unsupported redis address {other:?}")),
        };
        // The peer crates take a URL: the one the store's driver connects with.
        let url = tools::driver_url(store).map_err(|e| e.to_string())?.to_owned();
        let conn = client.get_connection_manager().await.map_err(|e| e.to_string())?;
        Ok(RedisSide { url, host, port, store: store.clone(), conn })
    }

    /// The Redis key holding the lease of `key` (the store's layout: prefix, key in braces).
    pub(super) fn lease_key(&self, key: &str) -> String {
        let key = leasehold::Key::new(key).expect("a bench key");
        leasehold::backends::redis::tools::key_names(&self.store, &key).expect("a redis URL").lease
    }

    /// Calls of the named commands so far (INFO commandstats). Commands a script runs
    /// internally are counted under their own names, so passing only what a client sends
    /// counts client requests.
    pub(super) async fn calls(&self, names: &[&str]) -> BenchResult<u64> {
        Ok(self.stats(names).await?.0)
    }

    /// Calls of the named commands so far and the server time they took, in µs.
    pub(super) async fn stats(&self, names: &[&str]) -> BenchResult<(u64, u64)> {
        command_stats(&mut self.conn.clone(), names).await
    }

    /// Runs `f` and returns its output with the named commands' calls and server µs meanwhile.
    pub(super) async fn timed<T>(
        &self,
        names: &[&str],
        f: impl Future<Output = BenchResult<T>>,
    ) -> BenchResult<(T, (u64, u64))> {
        let (c0, u0) = self.stats(names).await?;
        let out = f.await?;
        let (c1, u1) = self.stats(names).await?;
        Ok((out, (c1.saturating_sub(c0), u1.saturating_sub(u0))))
    }

    /// The PTTL of each key, in one pipelined round trip.
    pub(super) async fn pttls(&self, keys: &[String]) -> BenchResult<Vec<i64>> {
        let mut pipe = ::redis::pipe();
        for k in keys {
            pipe.cmd("PTTL").arg(k);
        }
        let mut c = self.conn.clone();
        pipe.query_async(&mut c).await.map_err(|e| e.to_string())
    }

    pub(super) async fn version(&self) -> String {
        let mut c = self.conn.clone();
        let info: String =
            ::redis::cmd("INFO").arg("server").query_async(&mut c).await.unwrap_or_default();
        info.lines()
            .find_map(|l| l.strip_prefix("redis_version:"))
            .unwrap_or("?")
            .trim()
            .to_string()
    }
}

const RAW_RELEASE: &str = r"
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0";

/// Calls of the named commands on the node `c` is connected to so far and the server time
/// they took, in µs (INFO commandstats).
pub(super) async fn command_stats(
    c: &mut impl ::redis::aio::ConnectionLike,
    names: &[&str],
) -> BenchResult<(u64, u64)> {
    let info: String =
        ::redis::cmd("INFO").arg("commandstats").query_async(c).await.map_err(|e| e.to_string())?;
    let (mut calls, mut usec) = (0, 0);
    for line in info.lines() {
        let Some(rest) = line.strip_prefix("cmdstat_") else { continue };
        let Some((name, stats)) = rest.split_once(':') else { continue };
        if names.contains(&name) {
            for kv in stats.split(',') {
                if let Some(v) = kv.strip_prefix("calls=") {
                    calls += v.parse::<u64>().unwrap_or(0);
                } else if let Some(v) = kv.strip_prefix("usec=") {
                    usec += v.parse::<u64>().unwrap_or(0);
                }
            }
        }
    }
    Ok((calls, usec))
}

/// Raw redis-rs: plain `SET NX PX`, then EVALSHA compare-and-delete (one attempt only). With
/// `fenced`, the two scripts leasehold sends instead, with the same keys and arguments: the
/// grant (SET NX PX, the holder info, the fence counter) and the release (compare-and-delete
/// of lease and holder info, its tombstone, PUBLISH), so the pairing isolates what the client side costs.
/// `C` is the connection: one server's, or redis-rs's cluster connection (routed by key slot).
#[derive(Clone)]
pub(super) struct Raw<C = ::redis::aio::ConnectionManager> {
    conn: C,
    fenced: bool,
    grant: Arc<::redis::Script>,
    release: Arc<::redis::Script>,
    /// The holder info line a locker keeps beside each grant (fenced mode sends it too).
    info: String,
    /// The release's publishing command (`SPUBLISH` on a cluster, as the store sends).
    publish: &'static str,
}

impl Raw {
    pub(super) fn new(r: &RedisSide, fenced: bool) -> Self {
        Raw::on(r.conn.clone(), fenced, "PUBLISH")
    }
}

impl<C> Raw<C> {
    /// On connection `conn`, releases publishing with `publish`.
    pub(super) fn on(conn: C, fenced: bool, publish: &'static str) -> Self {
        // leasehold's own script texts, so the pairing stays exact if they change.
        let (lh_grant, lh_release) = leasehold::backends::redis::tools::scripts();
        Raw {
            conn,
            fenced,
            grant: Arc::new(::redis::Script::new(lh_grant)),
            release: Arc::new(::redis::Script::new(if fenced { lh_release } else { RAW_RELEASE })),
            info: leasehold::HolderInfo::this_process().encode(),
            publish,
        }
    }
}

impl<C> Contender for Raw<C>
where
    C: ::redis::aio::ConnectionLike + Clone + Send + Sync + 'static,
{
    type Guard = (String, String);
    async fn acquire(&self, key: &str, _wait: Duration) -> BenchResult<Option<Self::Guard>> {
        let mut c = self.conn.clone();
        let owner = OwnerToken::generate().map_err(|e| e.to_string())?.to_string();
        let granted = if self.fenced {
            let mut inv = self.grant.prepare_invoke();
            let ttl = TTL.as_millis() as u64;
            leasehold::backends::redis::tools::grant_args(&mut inv, key, &owner, ttl, &self.info);
            let (ok, _fence): (i64, i64) =
                inv.invoke_async(&mut c).await.map_err(|e| e.to_string())?;
            ok == 1
        } else {
            let ok: Option<String> = ::redis::cmd("SET")
                .arg(key)
                .arg(&owner)
                .arg("NX")
                .arg("PX")
                .arg(TTL.as_millis() as u64)
                .query_async(&mut c)
                .await
                .map_err(|e| e.to_string())?;
            ok.is_some()
        };
        Ok(granted.then(|| (key.to_owned(), owner)))
    }
    async fn release(&self, (key, owner): Self::Guard) -> BenchResult<()> {
        let mut c = self.conn.clone();
        let mut inv = self.release.prepare_invoke();
        if self.fenced {
            leasehold::backends::redis::tools::release_args(&mut inv, &key, &owner, self.publish);
        } else {
            inv.key(&key).arg(&owner);
        }
        let deleted: i64 = inv.invoke_async(&mut c).await.map_err(|e| e.to_string())?;
        if deleted != 0 { Ok(()) } else { Err("raw release found the key not ours".into()) }
    }
}

/// `redis-benchmark` doing `SET … NX PX` with 50 clients and 16-deep pipelines, for about
/// `d`. Returns requests per second.
pub(super) async fn redis_benchmark(r: &RedisSide, d: Duration) -> BenchResult<f64> {
    // Size the request count from a short probe so the run lasts about `d`.
    let probe = run_redis_benchmark(r, 100_000).await?;
    let n = ((probe * d.as_secs_f64()) as u64).clamp(100_000, 50_000_000);
    run_redis_benchmark(r, n).await
}

async fn run_redis_benchmark(r: &RedisSide, n: u64) -> BenchResult<f64> {
    redis_benchmark_rps(&r.host, &r.port.to_string(), false, n).await
}

/// `n` requests of `redis-benchmark -c 50 -P 16 -r 1000000 SET KEY v NX PX 30000` against
/// `host:port` (with `--cluster`: every master, keys tagged per master); requests per second.
pub(super) async fn redis_benchmark_rps(
    host: &str,
    port: &str,
    cluster: bool,
    n: u64,
) -> BenchResult<f64> {
    let key = if cluster { "bench:rb:{tag}:__rand_int__" } else { "bench:rb:__rand_int__" };
    let out = tokio::process::Command::new("redis-benchmark")
        .args(cluster.then_some("--cluster"))
        .args(["-h", host, "-p", port, "-c", "50", "-P", "16", "-r", "1000000"])
        .args(["-n", &n.to_string(), "-q", "SET", key, "v", "NX", "PX", "30000"])
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

#[cfg(feature = "peers")]
pub(super) mod peers {
    //! The peer crate, driven the way its documentation shows.
    use super::*;
    use rslock::LockManager;

    /// rslock: `lock` (3 tries, 0-200 ms apart) for one attempt, `acquire_no_guard` (loops on
    /// `lock`) to wait, `unlock` to release.
    #[derive(Clone)]
    pub struct Rslock(pub LockManager);

    impl Contender for Rslock {
        type Guard = rslock::Lock;
        async fn acquire(&self, key: &str, wait: Duration) -> BenchResult<Option<rslock::Lock>> {
            if wait.is_zero() {
                return self.0.lock(key.as_bytes(), TTL).await.map(Some).map_err(|e| e.to_string());
            }
            match tokio::time::timeout(wait, self.0.acquire_no_guard(key.as_bytes(), TTL)).await {
                Ok(r) => r.map(Some).map_err(|e| e.to_string()),
                Err(_) => Ok(None),
            }
        }
        async fn release(&self, lock: rslock::Lock) -> BenchResult<()> {
            self.0.unlock(&lock).await;
            Ok(())
        }
    }
}
