//! Independent private Redis instances for Redlock (`redlock://` over all of them), any
//! subset killed, or restarted without persistence (it forgets every key), on demand.

use crate::failure::{FailingStore, Plan};
use crate::stores::redis::server::RedisServer;

/// `n` private `redis-server`s without persistence (`--save '' --appendonly no`), killed on
/// drop.
pub struct RedlockSet {
    servers: Vec<RedisServer>,
}

impl RedlockSet {
    /// Starts `n` instances.
    pub fn start(n: usize) -> Self {
        RedlockSet { servers: (0..n).map(|_| RedisServer::start()).collect() }
    }

    /// The instances.
    pub fn servers(&self) -> &[RedisServer] {
        &self.servers
    }

    /// How many instances there are.
    pub fn len(&self) -> usize {
        self.servers.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.servers.is_empty()
    }

    /// `redlock://127.0.0.1:P1,…` over every instance, plus `suffix` (e.g. `?prefix=x:`).
    pub fn url(&self, suffix: &str) -> String {
        let ports: Vec<u16> = self.servers.iter().map(RedisServer::port).collect();
        Self::url_of(&ports, suffix)
    }

    /// `redlock://127.0.0.1:P1,…` over `ports` (e.g. fault proxies in front of the instances).
    pub fn url_of(ports: &[u16], suffix: &str) -> String {
        let hosts: Vec<String> = ports.iter().map(|p| format!("127.0.0.1:{p}")).collect();
        format!("redlock://{}{suffix}", hosts.join(","))
    }

    /// `kill -9` of instance `i`.
    pub fn kill9(&mut self, i: usize) {
        self.servers[i].kill9();
    }

    /// Starts instance `i` again (killing it first if it runs) on its port, empty: without
    /// persistence it remembers no key and no fence counter.
    pub fn restart(&mut self, i: usize) {
        self.servers[i].restart();
    }

    /// Restarts the instances `which` empty, in parallel (each as [`RedlockSet::restart`]).
    pub fn restart_many(&mut self, which: &[usize]) {
        std::thread::scope(|scope| {
            for (i, s) in self.servers.iter_mut().enumerate() {
                if which.contains(&i) {
                    scope.spawn(move || s.restart());
                }
            }
        });
    }

    /// How many instances hold `key` now (`EXISTS`), of those that answer.
    pub fn holding(&self, key: &str) -> usize {
        self.servers.iter().filter(|s| s.cli(&["EXISTS", key]) == "1").count()
    }
}

/// Redlock over five instances failing: the `kill` instances are killed (-9) at once, and
/// restarted empty (in parallel, without waiting out a TTL first).
pub(super) struct Failing {
    set: RedlockSet,
    kill: &'static [usize],
}

/// `store-kill` on five instances: a minority (2) killed and restarted empty, or (`majority`)
/// three, after which a majority has forgotten the holder's grant.
pub(crate) fn plan(majority: bool) -> Plan {
    if majority {
        Plan {
            start: || Box::new(Failing { set: RedlockSet::start(5), kill: &[0, 1, 2] }),
            setup: "five private Redis instances without persistence (redlock:// over all five), \
                    fresh for each trial; three of them (a majority) were killed (-9) during the \
                    hold and restarted empty half a lease later, without first waiting out a TTL \
                    (the delayed restart Redlock asks for): from then a majority had forgotten \
                    the holder's grant",
        }
    } else {
        Plan {
            start: || Box::new(Failing { set: RedlockSet::start(5), kill: &[0, 1] }),
            setup: "five private Redis instances without persistence (redlock:// over all five), \
                    fresh for each trial; a minority (instances 1 and 2) was killed (-9) during \
                    the hold and restarted empty half a lease later; the majority kept the grant",
        }
    }
}

impl FailingStore for Failing {
    fn url(&self, suffix: &str) -> String {
        self.set.url(suffix)
    }
    fn kill9(&mut self) {
        for &i in self.kill {
            self.set.kill9(i);
        }
    }
    fn restart(&mut self) {
        self.set.restart_many(self.kill);
    }
}
