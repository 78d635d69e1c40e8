//! Keeps a benchmark's load off Redis's core. On this 2-core machine a load generator (the
//! worker, `redis-benchmark`, the console it measures) that shares a core with redis-server
//! preempts it and moves it between cores; SLOWLOG then logs commands at several times their
//! cost, and a throughput is the scheduler's as much as the code's. In production Redis has a
//! host of its own.

use super::RedisServer;
use std::process::Command;

/// Every CPU of the machine: `available_parallelism` counts this process's own affinity, one
/// core once it has been pinned.
pub fn cpus() -> usize {
    Command::new("nproc")
        .arg("--all")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse::<usize>().ok())
        .unwrap_or(1)
}

/// The CPU [`redis_apart`] gives Redis: the last one.
pub fn redis_cpu() -> usize {
    cpus().saturating_sub(1)
}

/// Pins redis-server to the last CPU at real-time priority and this process (and so every
/// child it starts afterwards) to the others. False where there is one CPU, no `taskset`, or
/// the pin was refused: the caller says so beside its figures.
pub fn redis_apart(server: &RedisServer) -> bool {
    let cpus = cpus();
    let Some(pid) = server.pid() else {
        return false;
    };
    if cpus < 2 {
        return false;
    }
    let last = (cpus - 1).to_string();
    let rest = if cpus == 2 {
        "0".to_string()
    } else {
        format!("0-{}", cpus - 2)
    };
    let taskset = |list: &str, pid: u32| {
        Command::new("taskset")
            .args(["-a", "-p", "-c", list, &pid.to_string()])
            .output()
            .is_ok_and(|o| o.status.success())
    };
    // This process's threads come and go (a thread that ended between taskset listing and
    // pinning it fails the call): best effort here, the children it starts next inherit it.
    let _ = taskset(&rest, std::process::id());
    let pinned = taskset(&last, pid);
    // The pin keeps the benchmark's processes off Redis's core, not the machine's others (the
    // PostgreSQL and MariaDB servers, kernel threads): a real-time class for every thread of
    // redis-server makes its core as much its own as a dedicated host's. Where that is not
    // permitted, the pin alone.
    let _ = Command::new("chrt")
        .args(["-f", "-a", "-p", "1", &pid.to_string()])
        .output();
    pinned
}
