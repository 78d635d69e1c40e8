//! A real Prometheus server (the distribution's package) on a free loopback port in a
//! temporary directory, scraping the console's exporter every second with the rules of
//! `deploy/prometheus`, and a tiny HTTP client for its API.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct Prometheus {
    port: u16,
    child: Child,
    _dir: tempfile::TempDir,
}

/// Fails the test with what to do when Prometheus is not installed (CI installs it).
pub fn require_prometheus() {
    let found = Command::new("prometheus")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        found,
        "prometheus is not installed: apt-get install -y prometheus (.ci/run does)"
    );
}

impl Prometheus {
    /// Scrapes `target` (HOST:PORT) as job `seckill` every second and evaluates the shipped
    /// rules every second.
    pub fn scraping(target: &str) -> Prometheus {
        require_prometheus();
        let rules =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/prometheus/seckill-rules.yml");
        let config = format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nrule_files:\n  - {}\nscrape_configs:\n  - job_name: seckill\n    static_configs:\n      - targets: ['{target}']\n",
            rules.display()
        );
        // A port taken between choosing it and binding it: try another.
        for _ in 0..5 {
            let dir = tempfile::Builder::new()
                .prefix("seckill-prometheus-")
                .tempdir()
                .expect("temp dir");
            let config_path = dir.path().join("prometheus.yml");
            std::fs::write(&config_path, &config).expect("config");
            let log = dir.path().join("prometheus.log");
            let port = super::redis_server::free_port();
            let child = Command::new("prometheus")
                .arg(format!("--config.file={}", config_path.display()))
                .arg(format!(
                    "--storage.tsdb.path={}",
                    dir.path().join("data").display()
                ))
                .arg(format!("--web.listen-address=127.0.0.1:{port}"))
                .stdout(Stdio::null())
                .stderr(Stdio::from(std::fs::File::create(&log).expect("log")))
                .spawn()
                .expect("start prometheus");
            let mut p = Prometheus {
                port,
                child,
                _dir: dir,
            };
            let started = Instant::now();
            while started.elapsed() < Duration::from_secs(30) {
                if get(p.port, "/-/ready").is_some_and(|(code, _)| code == 200) {
                    return p;
                }
                if p.child.try_wait().ok().flatten().is_some() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            eprintln!(
                "prometheus did not start on {port}: {}",
                std::fs::read_to_string(&log).unwrap_or_default()
            );
        }
        panic!("could not start prometheus");
    }

    /// An instant query's result vector.
    pub fn query(&self, promql: &str) -> Vec<serde_json::Value> {
        let (code, body) = get(
            self.port,
            &format!("/api/v1/query?query={}", encode(promql)),
        )
        .unwrap_or_else(|| panic!("Prometheus did not answer {promql}"));
        let doc: serde_json::Value =
            serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}"));
        assert_eq!(code, 200, "{promql}: {body}");
        assert_eq!(doc["status"], "success", "{promql}: {body}");
        doc["data"]["result"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    /// The alerts Prometheus holds now (pending and firing).
    pub fn alerts(&self) -> Vec<serde_json::Value> {
        let (_, body) = get(self.port, "/api/v1/alerts").expect("alerts");
        let doc: serde_json::Value = serde_json::from_str(&body).expect("JSON");
        doc["data"]["alerts"]
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    /// Waits (at most a minute) until `done` holds, saying what was awaited when it does not.
    pub fn wait_for(&self, what: &str, mut done: impl FnMut(&Prometheus) -> bool) {
        let started = Instant::now();
        while !done(self) {
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "Prometheus never showed {what}; alerts: {:?}",
                self.alerts()
            );
            std::thread::sleep(Duration::from_millis(250));
        }
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Percent-encodes a query parameter.
fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// `GET path` on 127.0.0.1:`port`: the status code and the body, or None when nothing answers.
pub fn get(port: u16, path: &str) -> Option<(u16, String)> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    s.write_all(format!("GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").as_bytes())
        .ok()?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).ok()?;
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n")?;
    let code = head.split(' ').nth(1)?.parse().ok()?;
    Some((code, body.to_string()))
}
