//! Stand-ins for the baselines of stores compiled out of this build. None of them is ever
//! constructed: each constructor answers that its store is not built in, and the scenarios
//! only reach a baseline through an `Option` that is then `None`.

#![allow(dead_code, clippy::unused_async)]

use std::time::Duration;

use super::{BenchResult, Contender};

macro_rules! never {
    ($($name:ident),* $(,)?) => {$(
        /// A baseline of a store this build does not have (uninhabited).
        #[derive(Debug)]
        pub(super) enum $name {}
        impl Clone for $name {
            fn clone(&self) -> Self {
                match *self {}
            }
        }
    )*};
}
never!(RedisSide, Raw);
// The primitives scenario's peer crate (feature `peer-distributed-lock`).
never!(DlPeer);

fn not_built<T>(store: &str) -> BenchResult<T> {
    Err(format!("this leasehold was built without the {store} feature"))
}

impl RedisSide {
    pub(super) async fn connect(_: &leasehold::StoreUrl) -> BenchResult<Self> {
        not_built("redis")
    }
    pub(super) async fn calls(&self, _: &[&str]) -> BenchResult<u64> {
        match *self {}
    }
    pub(super) async fn timed<T>(
        &self,
        _: &[&str],
        _: impl Future<Output = BenchResult<T>>,
    ) -> BenchResult<(T, (u64, u64))> {
        match *self {}
    }
    pub(super) async fn pttls(&self, _: &[String]) -> BenchResult<Vec<i64>> {
        match *self {}
    }
    pub(super) fn lease_key(&self, _: &str) -> String {
        match *self {}
    }
    pub(super) async fn version(&self) -> String {
        match *self {}
    }
}

impl Raw {
    pub(super) fn new(r: &RedisSide, _: bool) -> Self {
        match *r {}
    }
}

pub(super) async fn redis_benchmark(r: &RedisSide, _: Duration) -> BenchResult<f64> {
    match *r {}
}

macro_rules! never_contends {
    ($($name:ident),*) => {$(
        impl Contender for $name {
            type Guard = ();
            async fn acquire(&self, _: &str, _: Duration) -> BenchResult<Option<()>> {
                match *self {}
            }
            async fn release(&self, _: ()) -> BenchResult<()> {
                match *self {}
            }
        }
    )*};
}
never_contends!(Raw);
