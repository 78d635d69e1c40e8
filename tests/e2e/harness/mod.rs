//! The test harness: private redis-server processes on free loopback ports, databases made per
//! test, a fault-injecting TCP proxy, and a runner for the real binary (a [`Console`] session
//! points it at a topology and a database).

#![allow(dead_code)]

pub mod cli;
pub mod db;
pub mod fixtures;
pub mod pin;
pub mod plan;
pub mod procstat;
pub mod prometheus;
pub mod proxy;
pub mod redis_benchmark;
pub mod redis_server;
pub mod seller;
pub mod sentinel;
pub mod session;
pub mod tmux;

pub use cli::{Run, console, console_env};
pub use db::TestDb;
pub use redis_server::{RedisCluster, RedisServer};
pub use session::{Console, assert_books, product};

use seckill_console::redis::RedisStore;

/// A standalone server or a 3-primary cluster, for tests that run on both.
pub enum Topo {
    Standalone(RedisServer),
    Cluster(RedisCluster),
}

impl Topo {
    pub fn standalone() -> Self {
        Topo::Standalone(RedisServer::start())
    }

    pub fn cluster() -> Self {
        Topo::Cluster(RedisCluster::start())
    }

    /// Both topologies, standalone first.
    pub fn both() -> Vec<Self> {
        vec![Self::standalone(), Self::cluster()]
    }

    pub fn name(&self) -> &'static str {
        match self {
            Topo::Standalone(_) => "standalone",
            Topo::Cluster(_) => "cluster",
        }
    }

    /// A library handle.
    pub async fn store(&self) -> RedisStore {
        match self {
            Topo::Standalone(s) => fixtures::standalone(&s.url()).await,
            Topo::Cluster(c) => fixtures::cluster(&c.seeds()).await,
        }
    }

    /// The global flags that point the binary here.
    pub fn flags(&self) -> Vec<String> {
        match self {
            Topo::Standalone(s) => vec!["--redis".into(), s.url()],
            Topo::Cluster(c) => vec!["--redis-cluster".into(), c.seeds()],
        }
    }

    /// Every server process (one, or each cluster node).
    pub fn servers(&self) -> Vec<&RedisServer> {
        match self {
            Topo::Standalone(s) => vec![s],
            Topo::Cluster(c) => c.nodes.iter().collect(),
        }
    }

    /// Runs a command on every server.
    pub fn cli_all(&self, args: &[&str]) -> Vec<String> {
        self.servers().iter().map(|s| s.cli(args)).collect()
    }

    /// The ports of every server.
    pub fn ports(&self) -> Vec<u16> {
        self.servers().iter().map(|s| s.port).collect()
    }
}
