//! The exporter's HTTP side: `GET /metrics` and `GET /healthz`, answered from what the last
//! round published. It runs on a thread and a runtime of its own, so that a poll's work (a
//! large activity's books take tens of milliseconds of CPU) never makes a scrape wait, and a
//! scrape costs Redis and the database nothing: ten Prometheus servers read the same text.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// The content type of the OpenMetrics text format, which Prometheus asks for first.
const OPENMETRICS: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// A request's head may be this long at most.
const MAX_HEAD: usize = 8 * 1024;

/// A client that sends nothing for this long is let go.
const READ_TIMEOUT: Duration = Duration::from_secs(5);

/// What the last round published.
#[derive(Debug)]
pub struct Published {
    /// The metrics text.
    pub metrics: Arc<[u8]>,
    /// Why the exporter is unhealthy, if it is (an activity not read this round).
    pub problem: Option<String>,
    /// When the round ended.
    pub at: Instant,
}

/// The last round, shared between the poller and the server.
#[derive(Debug)]
pub struct Board {
    last: Mutex<Option<Arc<Published>>>,
    /// A round older than this makes `/healthz` fail: the poller is stuck.
    stale_after: Duration,
}

impl Board {
    pub fn new(stale_after: Duration) -> Board {
        Board {
            last: Mutex::new(None),
            stale_after,
        }
    }

    pub fn publish(&self, p: Published) {
        if let Ok(mut last) = self.last.lock() {
            *last = Some(Arc::new(p));
        }
    }

    fn last(&self) -> Option<Arc<Published>> {
        self.last.lock().ok().and_then(|l| l.clone())
    }

    /// `/healthz`: healthy when the last round read every activity and is recent.
    fn health(&self) -> Result<(), String> {
        let Some(p) = self.last() else {
            return Err("no poll has finished yet".into());
        };
        let age = p.at.elapsed();
        if age > self.stale_after {
            return Err(format!(
                "the last poll ended {} s ago (stale after {} s)",
                age.as_secs(),
                self.stale_after.as_secs()
            ));
        }
        match &p.problem {
            Some(why) => Err(why.clone()),
            None => Ok(()),
        }
    }
}

/// Connections answered at once at most: more wait in the listen queue, so a flood cannot
/// take the file descriptors the polls need for Redis and the database.
const MAX_CONNECTIONS: usize = 64;

/// Accepts connections until the process ends.
pub async fn serve(listener: TcpListener, board: Arc<Board>) {
    let slots = Arc::new(tokio::sync::Semaphore::new(MAX_CONNECTIONS));
    loop {
        let Ok(slot) = Arc::clone(&slots).acquire_owned().await else {
            return;
        };
        match listener.accept().await {
            Ok((stream, _)) => {
                let board = Arc::clone(&board);
                tokio::spawn(async move {
                    let _ = tokio::time::timeout(READ_TIMEOUT * 2, answer(stream, &board)).await;
                    drop(slot);
                });
            }
            // Out of file descriptors, say: wait a little rather than spin.
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
    }
}

/// Reads one request and answers it; the connection closes after (a scrape a second per
/// server needs no keep-alive).
async fn answer(mut stream: TcpStream, board: &Board) -> std::io::Result<()> {
    let mut head = Vec::with_capacity(512);
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = tokio::time::timeout(READ_TIMEOUT, stream.read(&mut buf))
            .await
            .map_err(|_| std::io::ErrorKind::TimedOut)??;
        if n == 0 {
            return Ok(());
        }
        head.extend_from_slice(&buf[..n]);
        if head.len() > MAX_HEAD {
            return respond(
                &mut stream,
                "431 Request Header Fields Too Large",
                "text/plain",
                b"request head too large\n",
                true,
            )
            .await;
        }
    }
    let line = head.split(|b| *b == b'\r').next().unwrap_or_default();
    let line = String::from_utf8_lossy(line);
    let mut parts = line.split(' ');
    let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let with_body = method != "HEAD";
    if method != "GET" && method != "HEAD" {
        return respond(
            &mut stream,
            "405 Method Not Allowed",
            "text/plain",
            b"GET only\n",
            true,
        )
        .await;
    }
    // The query (Prometheus adds none; a browser might) does not choose anything.
    let path = target.split('?').next().unwrap_or("");
    match path {
        "/metrics" => match board.last() {
            Some(p) => respond(&mut stream, "200 OK", OPENMETRICS, &p.metrics, with_body).await,
            None => {
                respond(
                    &mut stream,
                    "503 Service Unavailable",
                    "text/plain",
                    b"no poll has finished yet\n",
                    with_body,
                )
                .await
            }
        },
        "/healthz" => match board.health() {
            Ok(()) => respond(&mut stream, "200 OK", "text/plain", b"ok\n", with_body).await,
            Err(why) => {
                let body = format!("unhealthy: {why}\n");
                respond(
                    &mut stream,
                    "503 Service Unavailable",
                    "text/plain",
                    body.as_bytes(),
                    with_body,
                )
                .await
            }
        },
        _ => {
            respond(
                &mut stream,
                "404 Not Found",
                "text/plain",
                b"try /metrics or /healthz\n",
                with_body,
            )
            .await
        }
    }
}

async fn respond(
    stream: &mut TcpStream,
    status: &str,
    content_type: &str,
    body: &[u8],
    with_body: bool,
) -> std::io::Result<()> {
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await?;
    if with_body {
        stream.write_all(body).await?;
    }
    stream.flush().await?;
    let _ = stream.shutdown().await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn get(addr: std::net::SocketAddr, request: &str) -> String {
        let mut s = TcpStream::connect(addr).await.expect("connect");
        s.write_all(request.as_bytes()).await.expect("send");
        let mut out = String::new();
        s.read_to_string(&mut out).await.expect("read");
        out
    }

    #[tokio::test]
    async fn metrics_and_health_come_from_the_last_round() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let board = Arc::new(Board::new(Duration::from_secs(60)));
        tokio::spawn(serve(listener, Arc::clone(&board)));
        let r = get(addr, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").await;
        assert!(r.starts_with("HTTP/1.1 503"), "{r}");
        let r = get(addr, "GET /healthz HTTP/1.1\r\n\r\n").await;
        assert!(
            r.starts_with("HTTP/1.1 503") && r.contains("no poll"),
            "{r}"
        );
        board.publish(Published {
            metrics: Arc::from(&b"seckill_up{target=\"redis\"} 1\n# EOF\n"[..]),
            problem: None,
            at: Instant::now(),
        });
        let r = get(addr, "GET /metrics HTTP/1.1\r\n\r\n").await;
        assert!(r.starts_with("HTTP/1.1 200 OK"), "{r}");
        assert!(
            r.contains("Content-Type: application/openmetrics-text"),
            "{r}"
        );
        assert!(r.ends_with("# EOF\n"), "{r}");
        let r = get(addr, "GET /healthz HTTP/1.1\r\n\r\n").await;
        assert!(r.starts_with("HTTP/1.1 200") && r.ends_with("ok\n"), "{r}");
        board.publish(Published {
            metrics: Arc::from(&b"# EOF\n"[..]),
            problem: Some("a1: Redis at x is unreachable".into()),
            at: Instant::now(),
        });
        let r = get(addr, "GET /healthz HTTP/1.1\r\n\r\n").await;
        assert!(
            r.starts_with("HTTP/1.1 503") && r.contains("a1: Redis"),
            "{r}"
        );
        let r = get(addr, "POST /metrics HTTP/1.1\r\n\r\n").await;
        assert!(r.starts_with("HTTP/1.1 405"), "{r}");
        let r = get(addr, "GET /nope HTTP/1.1\r\n\r\n").await;
        assert!(r.starts_with("HTTP/1.1 404"), "{r}");
    }
}
