//! How NATS fails in `leasehold chaos`: `store-kill` on a private single JetStream server
//! (file storage, killed -9 and restarted on its port and store directory), `failover` on a
//! private 3-node JetStream cluster whose grants' stream leader is killed, and the
//! `nats-cluster` topology (the same cluster: its stream leader killed, or restarted after).

use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::server::{NatsCluster, NatsServer};
use crate::failure::{FailingStore, Plan};

/// How long the surviving nodes get to elect a new leader of the grants' stream.
const ELECTION: Duration = Duration::from_secs(30);

/// `store-kill` on a private single server; `failover` on a fresh 3-node cluster.
pub(super) fn plan(failover: bool) -> Plan {
    if failover {
        Plan {
            start: || Box::new(Cluster::start()),
            setup: "a private three-node JetStream cluster (file storage), fresh for each trial, \
                    its buckets with three replicas (replicas=3 unless the URL says otherwise); \
                    the node leading the grants' stream (KV_BUCKET) was killed (-9) during the \
                    hold and the two others elected a new stream leader; holder and successor \
                    know all three nodes",
        }
    } else {
        Plan {
            start: || Box::new(Single(NatsServer::start())),
            setup: "a private single nats-server with JetStream (file storage), fresh for each \
                    trial, killed (-9) during the hold and restarted on its port and store \
                    directory",
        }
    }
}

/// The `nats-cluster` topology's `store-kill` and `failover`: the stream leader killed (and,
/// for `store-kill`, restarted on its store afterwards).
pub(crate) fn cluster_plan() -> Plan {
    Plan {
        start: || Box::new(Cluster::start()),
        setup: "a private three-node JetStream cluster (file storage, replicas=3), fresh for \
                each trial; the node leading the grants' stream (KV_BUCKET, $JS.API.STREAM.INFO) \
                was killed (-9) during the hold and the two others elected a new stream leader \
                (store-kill: the old leader was restarted on its store afterwards); holder and \
                successor know all three nodes",
    }
}

/// A single server: killed and restarted on its port and store.
struct Single(NatsServer);

impl FailingStore for Single {
    fn url(&self, suffix: &str) -> String {
        self.0.url(suffix)
    }
    fn kill9(&mut self) {
        self.0.kill9();
    }
    fn restart(&mut self) {
        self.0.restart();
    }
}

/// A 3-node cluster and the node it killed.
pub(crate) struct Cluster {
    nodes: NatsCluster,
    killed: Option<usize>,
    /// The suffix of the URL last handed out (its bucket names the grants' stream).
    suffix: Mutex<String>,
}

impl Cluster {
    /// Starts three nodes and waits until JetStream takes requests (a meta leader elected)
    /// and can place a stream on all three.
    pub(crate) fn start() -> Self {
        let nodes = NatsCluster::start(3);
        assert!(nodes.wait_jetstream(ELECTION), "the NATS cluster elected no JetStream leader");
        assert!(nodes.wait_placement(ELECTION), "the NATS cluster placed no 3-replica stream");
        Cluster { nodes, killed: None, suffix: Mutex::default() }
    }

    /// Kills the grants' stream's leader and waits for another; what happened, in words.
    fn kill_leader(&mut self) -> Result<(usize, usize, Duration), String> {
        let suffix = self.suffix.lock().map(|s| s.clone()).unwrap_or_default();
        let stream = grants_stream(&self.url_with_replicas(&suffix))?;
        let old = self
            .nodes
            .wait_stream_leader(&stream, None, ELECTION)
            .ok_or_else(|| format!("no node leads {stream}"))?;
        self.nodes.kill9(old);
        self.killed = Some(old);
        let t0 = Instant::now();
        let new = self
            .nodes
            .wait_stream_leader(&stream, Some(old), ELECTION)
            .ok_or_else(|| format!("no new leader of {stream} within {ELECTION:?}"))?;
        Ok((old, new, t0.elapsed()))
    }

    /// The cluster's URL with `suffix`, three replicas unless `suffix` asks for some.
    fn url_with_replicas(&self, suffix: &str) -> String {
        if suffix.contains("replicas=") {
            self.nodes.url(suffix)
        } else {
            let sep = if suffix.contains('?') { '&' } else { '?' };
            self.nodes.url(&format!("{suffix}{sep}replicas=3"))
        }
    }

    /// The cluster, for the partition topology (its ports and URL).
    pub(crate) fn nodes(&self) -> &NatsCluster {
        &self.nodes
    }
}

impl FailingStore for Cluster {
    fn url(&self, suffix: &str) -> String {
        if let Ok(mut s) = self.suffix.lock() {
            suffix.clone_into(&mut s);
        }
        self.url_with_replicas(suffix)
    }
    /// Kills the grants' stream's leader (`store-kill` on the topology).
    fn kill9(&mut self) {
        let _ = self.kill_leader();
    }
    fn restart(&mut self) {
        if let Some(i) = self.killed.take() {
            self.nodes.restart(i);
        }
    }
    fn fail_over(&mut self, suffix: &str) -> (String, String) {
        let what = match self.kill_leader() {
            Ok((old, new, took)) => format!(
                "leader of the grants' stream (node {old}) killed; node {new} took over within \
                 {} ms",
                took.as_millis()
            ),
            Err(e) => format!("stream leader failover failed: {e}"),
        };
        (what, self.url(suffix))
    }
}

/// The JetStream stream of the grants' bucket `url` names (`KV_BUCKET`), from its parsed
/// configuration.
fn grants_stream(url: &str) -> Result<String, String> {
    let url = leasehold::StoreUrl::parse(url).map_err(|e| e.to_string())?;
    #[cfg(feature = "nats")]
    return leasehold::backends::nats::tools::grants_stream(&url).map_err(|e| e.to_string());
    #[cfg(not(feature = "nats"))]
    Err(format!("{url}: this build has no nats:// store (cargo feature \"nats\")"))
}
