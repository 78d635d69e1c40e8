//! A Sentinel set of private processes: a primary, a replica and three Sentinels
//! (`redis-server sentinel.conf --sentinel`) watching them as `mymaster`, with a failover
//! detected after one second.

use super::redis_server::{RedisServer, free_port, spawn_ready};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use tempfile::TempDir;

/// The master's name in the Sentinels' configuration.
pub const MASTER: &str = "mymaster";

/// One Sentinel process.
pub struct Sentinel {
    pub port: u16,
    _dir: TempDir,
    child: Option<Child>,
}

impl Drop for Sentinel {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Sentinel {
    fn start(primary_port: u16) -> Self {
        for _ in 0..10 {
            let port = free_port();
            let dir = tempfile::Builder::new()
                .prefix("seckill-sentinel-")
                .tempdir()
                .expect("temp dir");
            let conf = dir.path().join("sentinel.conf");
            std::fs::write(
                &conf,
                format!(
                    "port {port}\nbind 127.0.0.1\nprotected-mode no\ndir {}\nlogfile sentinel.log\n\
                     sentinel monitor {MASTER} 127.0.0.1 {primary_port} 2\n\
                     sentinel down-after-milliseconds {MASTER} 1000\n\
                     sentinel failover-timeout {MASTER} 5000\n\
                     sentinel parallel-syncs {MASTER} 1\n",
                    dir.path().display()
                ),
            )
            .expect("sentinel.conf");
            let args = vec![conf.display().to_string(), "--sentinel".to_string()];
            if let Some(child) = spawn_ready(port, &args) {
                return Sentinel {
                    port,
                    _dir: dir,
                    child: Some(child),
                };
            }
        }
        panic!("no Sentinel started");
    }

    pub fn cli(&self, args: &[&str]) -> String {
        let out = Command::new("redis-cli")
            .args(["-h", "127.0.0.1", "-p", &self.port.to_string()])
            .args(args)
            .stdin(Stdio::null())
            .output()
            .expect("redis-cli");
        String::from_utf8_lossy(&out.stdout).to_string()
    }

    /// The master's `host:port` as this Sentinel names it.
    pub fn master_addr(&self) -> String {
        let out = self.cli(&["SENTINEL", "GET-MASTER-ADDR-BY-NAME", MASTER]);
        out.lines().collect::<Vec<_>>().join(":")
    }
}

/// A primary, one replica and three Sentinels.
pub struct SentinelSet {
    /// `[primary, replica]` at the start; which is which changes with failovers.
    pub servers: Vec<RedisServer>,
    pub sentinels: Vec<Sentinel>,
}

impl SentinelSet {
    pub fn start() -> Self {
        let primary = RedisServer::start();
        let replica =
            RedisServer::start_with(&["--replicaof", "127.0.0.1", &primary.port.to_string()]);
        let sentinels: Vec<Sentinel> = (0..3).map(|_| Sentinel::start(primary.port)).collect();
        let set = SentinelSet {
            servers: vec![primary, replica],
            sentinels,
        };
        // Ready: each Sentinel knows the replica and the two other Sentinels (else a failover
        // could not reach its quorum or would find no replica to promote).
        let started = Instant::now();
        loop {
            let ready = set.sentinels.iter().all(|s| {
                let master = s.cli(&["SENTINEL", "MASTER", MASTER]);
                let field = |name: &str| {
                    let lines: Vec<&str> = master.lines().collect();
                    lines
                        .iter()
                        .position(|l| *l == name)
                        .and_then(|i| lines.get(i + 1))
                        .and_then(|v| v.parse::<i64>().ok())
                        .unwrap_or(0)
                };
                field("num-slaves") >= 1 && field("num-other-sentinels") >= 2
            });
            if ready {
                break;
            }
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "the Sentinels did not find each other and the replica"
            );
            std::thread::sleep(Duration::from_millis(200));
        }
        set
    }

    /// `--redis-sentinel host:port,... --sentinel-master mymaster`.
    pub fn flags(&self) -> Vec<String> {
        let list: Vec<String> = self
            .sentinels
            .iter()
            .map(|s| format!("127.0.0.1:{}", s.port))
            .collect();
        vec![
            "--redis-sentinel".into(),
            list.join(","),
            "--sentinel-master".into(),
            MASTER.into(),
        ]
    }

    /// The master as the Sentinels name it (all three agreeing), once they do.
    pub fn agreed_master(&self) -> Option<String> {
        let first = self.sentinels[0].master_addr();
        self.sentinels
            .iter()
            .all(|s| s.master_addr() == first)
            .then_some(first)
    }

    /// Waits until every Sentinel names `addr` the master and it says it is one.
    pub fn wait_for_master(&self, addr: &str, within: Duration) {
        let started = Instant::now();
        loop {
            let promoted = self
                .servers
                .iter()
                .find(|s| s.addr() == addr)
                .and_then(|s| s.try_cli(&["ROLE"]))
                .is_some_and(|r| r.starts_with("master"));
            if promoted && self.agreed_master().as_deref() == Some(addr) {
                return;
            }
            assert!(
                started.elapsed() < within,
                "the Sentinels did not make {addr} the master within {within:?} (they name {:?})",
                self.agreed_master()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}
