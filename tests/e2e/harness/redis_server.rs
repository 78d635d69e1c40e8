//! Private `redis-server` processes in temporary directories, stopped when the value drops.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU16, Ordering};
use std::time::{Duration, Instant};
use tempfile::TempDir;

/// Ports handed out by this process; combined with a bind check so parallel test processes
/// (nextest) do not collide.
static NEXT_PORT: AtomicU16 = AtomicU16::new(0);

fn port_free(port: u16) -> bool {
    TcpListener::bind(("127.0.0.1", port)).is_ok()
}

/// A free port whose cluster bus port (port + 10000) is free too.
pub fn free_port() -> u16 {
    if NEXT_PORT.load(Ordering::Relaxed) == 0 {
        // Spread processes apart: start at a pid-derived offset in 20000..45000.
        let start = 20000 + (std::process::id() % 250) as u16 * 100;
        let _ = NEXT_PORT.compare_exchange(0, start, Ordering::Relaxed, Ordering::Relaxed);
    }
    loop {
        let p = NEXT_PORT.fetch_add(1, Ordering::Relaxed);
        if p >= 45000 {
            NEXT_PORT.store(20000, Ordering::Relaxed);
            continue;
        }
        if port_free(p) && port_free(p + 10000) {
            return p;
        }
    }
}

pub fn require_redis_server() {
    let ok = Command::new("redis-server")
        .arg("--version")
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        ok,
        "redis-server is not on PATH: install it with `apt-get install -y redis-server redis-tools`"
    );
}

/// One redis-server child.
pub struct RedisServer {
    pub port: u16,
    pub dir: TempDir,
    child: Option<Child>,
    args: Vec<String>,
}

fn base_args(port: u16, dir: &TempDir, extra: &[&str]) -> Vec<String> {
    let mut args: Vec<String> = [
        "--port",
        &port.to_string(),
        "--bind",
        "127.0.0.1",
        "--dir",
        &dir.path().display().to_string(),
        "--save",
        "",
        "--appendonly",
        "no",
        "--daemonize",
        "no",
        "--logfile",
        "redis.log",
        "--protected-mode",
        "no",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    args.extend(extra.iter().map(|s| s.to_string()));
    args
}

/// The `--requirepass` of a server's arguments, if any.
fn password_of(args: &[String]) -> Option<String> {
    args.iter()
        .position(|a| a == "--requirepass")
        .and_then(|i| args.get(i + 1).cloned())
}

fn cli_output(port: u16, password: Option<&str>, args: &[&str]) -> Option<String> {
    let mut cmd = Command::new("redis-cli");
    cmd.args(["-h", "127.0.0.1", "-p", &port.to_string()]);
    if let Some(pw) = password {
        cmd.args(["-a", pw, "--no-auth-warning"]);
    }
    let out = cmd.args(args).stdin(Stdio::null()).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).to_string())
}

/// Spawns redis-server and waits for PONG; None when it exited (port taken) or never answered.
pub(super) fn spawn_ready(port: u16, args: &[String]) -> Option<Child> {
    let mut child = Command::new("redis-server")
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn redis-server");
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(10) {
        if let Ok(Some(_)) = child.try_wait() {
            return None;
        }
        // The pid check makes sure the answer comes from our child and not from another test
        // process's server that won the port.
        let pid_line = format!("process_id:{}", child.id());
        let password = password_of(args);
        if cli_output(port, password.as_deref(), &["INFO", "server"])
            .is_some_and(|o| o.contains(&pid_line))
        {
            return Some(child);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    None
}

impl RedisServer {
    /// A standalone server without persistence.
    pub fn start() -> Self {
        Self::start_with(&[])
    }

    /// A server with extra `--name value` arguments.
    pub fn start_with(extra: &[&str]) -> Self {
        require_redis_server();
        let dir = tempfile::Builder::new()
            .prefix("seckill-redis-")
            .tempdir()
            .expect("temp dir for redis-server");
        for _ in 0..10 {
            let port = free_port();
            let args = base_args(port, &dir, extra);
            if let Some(child) = spawn_ready(port, &args) {
                return RedisServer {
                    port,
                    dir,
                    child: Some(child),
                    args,
                };
            }
        }
        panic!("could not start redis-server on a free port");
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    pub fn log_path(&self) -> PathBuf {
        self.dir.path().join("redis.log")
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    pub fn try_cli(&self, args: &[&str]) -> Option<String> {
        cli_output(self.port, password_of(&self.args).as_deref(), args)
    }

    /// Runs redis-cli against this server and returns its stdout.
    pub fn cli(&self, args: &[&str]) -> String {
        self.try_cli(args)
            .unwrap_or_else(|| panic!("redis-cli {args:?} failed on port {}", self.port))
    }

    /// Sends a signal to the server process.
    pub fn signal(&self, sig: &str) {
        if let Some(pid) = self.pid() {
            let _ = Command::new("kill")
                .args([&format!("-{sig}"), &pid.to_string()])
                .status();
        }
    }

    /// Kills the server with SIGKILL and reaps it.
    pub fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the server again with the same arguments and directory (same port).
    pub fn restart(&mut self) {
        self.kill9();
        for _ in 0..50 {
            if let Some(child) = spawn_ready(self.port, &self.args) {
                self.child = Some(child);
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!("redis-server did not restart on port {}", self.port);
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            // A stopped process ignores SIGTERM until continued; SIGKILL needs nothing.
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A Redis Cluster of private servers, made with `redis-cli --cluster create`.
pub struct RedisCluster {
    pub nodes: Vec<RedisServer>,
    pub primaries: usize,
}

impl RedisCluster {
    /// Three primaries, no replicas.
    pub fn start() -> Self {
        Self::start_with(3, 0)
    }

    /// `primaries` primaries with `replicas` replicas each.
    pub fn start_with(primaries: usize, replicas: usize) -> Self {
        Self::start_with_args(primaries, replicas, &[])
    }

    /// Like [`RedisCluster::start_with`], every node with `extra` arguments (e.g. AOF).
    pub fn start_with_args(primaries: usize, replicas: usize, extra: &[&str]) -> Self {
        let total = primaries * (1 + replicas);
        let mut args = vec![
            "--cluster-enabled",
            "yes",
            "--cluster-config-file",
            "nodes.conf",
            "--cluster-node-timeout",
            "3000",
        ];
        args.extend_from_slice(extra);
        let nodes: Vec<RedisServer> = (0..total).map(|_| RedisServer::start_with(&args)).collect();
        let addrs: Vec<String> = nodes.iter().map(RedisServer::addr).collect();
        let mut cmd = Command::new("redis-cli");
        cmd.arg("--cluster").arg("create").args(&addrs);
        cmd.args(["--cluster-replicas", &replicas.to_string(), "--cluster-yes"]);
        let out = cmd
            .stdin(Stdio::null())
            .output()
            .expect("redis-cli --cluster create");
        assert!(
            out.status.success(),
            "cluster create failed: {}",
            String::from_utf8_lossy(&out.stdout)
        );
        let cluster = RedisCluster { nodes, primaries };
        cluster.wait_ok();
        cluster
    }

    /// Waits until every node reports `cluster_state:ok` and knows every other node.
    pub fn wait_ok(&self) {
        let started = Instant::now();
        loop {
            let replicas = self.nodes.len() - self.primaries;
            let ready = self.nodes.iter().all(|n| {
                n.try_cli(&["CLUSTER", "NODES"]).is_some_and(|nodes| {
                    nodes
                        .lines()
                        .filter(|l| l.contains(" slave ") || l.contains(",slave "))
                        .count()
                        == replicas
                })
            }) && self.nodes.iter().all(|n| {
                // Replicas must have finished their first sync.
                n.try_cli(&["INFO", "replication"]).is_some_and(|i| {
                    i.contains("role:master") || i.contains("master_link_status:up")
                })
            }) && self.nodes.iter().all(|n| {
                n.try_cli(&["CLUSTER", "INFO"]).is_some_and(|i| {
                    i.contains("cluster_state:ok")
                        && i.contains(&format!("cluster_known_nodes:{}", self.nodes.len()))
                })
            });
            if ready {
                return;
            }
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "cluster did not become ok within 30 s"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The `--redis-cluster` value: every node as a seed.
    pub fn seeds(&self) -> String {
        self.nodes
            .iter()
            .map(RedisServer::url)
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Runs a command on every node; returns the outputs.
    pub fn cli_all(&self, args: &[&str]) -> Vec<String> {
        self.nodes.iter().map(|n| n.cli(args)).collect()
    }

    /// The primary serving `key`.
    pub fn node_for(&self, key: &str) -> &RedisServer {
        let slot: u16 = self.nodes[0]
            .cli(&["CLUSTER", "KEYSLOT", key])
            .trim()
            .parse()
            .expect("slot");
        self.nodes
            .iter()
            .find(|n| {
                n.try_cli(&["CLUSTER", "NODES"]).is_some_and(|out| {
                    out.lines()
                        .any(|l| l.contains("myself") && l.contains("master") && owns(l, slot))
                })
            })
            .expect("a primary owns the slot")
    }
}

fn owns(nodes_line: &str, slot: u16) -> bool {
    nodes_line
        .split_whitespace()
        .skip(8)
        .any(|range| match range.split_once('-') {
            Some((a, b)) => {
                let (a, b): (u16, u16) = (a.parse().unwrap_or(1), b.parse().unwrap_or(0));
                (a..=b).contains(&slot)
            }
            None => range.parse::<u16>().is_ok_and(|s| s == slot),
        })
}
