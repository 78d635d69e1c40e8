//! A tiny fault-injecting TCP proxy (the kernel here has no netem): it forwards bytes between
//! clients and one upstream server, and on demand delays them, black-holes them, cuts a
//! connection right after forwarding a request (the server ran it, the client never hears the
//! reply), cuts one before a matching request reaches the server, or refuses and resets every
//! connection (a server that went down).

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What the proxy does to traffic.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Mode {
    /// Forward everything.
    Pass,
    /// Forward, each chunk after a delay.
    Delay(Duration),
    /// Accept and forward nothing: a hung server.
    BlackHole,
    /// Forward each request, then with this probability cut the connection before the reply.
    CutAfterRequest(f64),
    /// Reset existing connections and refuse new ones: a server that is down.
    Down,
    /// Cut the connection before forwarding a request that holds these bytes (a script's SHA,
    /// say): the server never runs it, everything else passes.
    CutBefore(&'static [u8]),
}

struct Shared {
    mode: Mutex<Mode>,
    stop: AtomicBool,
    seed: AtomicU64,
    /// Connections cut after a request, for assertions.
    cuts: AtomicU32,
    /// Bumped on every mode change; pumps of older connections end when it changes to Down.
    epoch: AtomicU64,
    conns: Mutex<Vec<TcpStream>>,
}

/// The proxy; it stops when dropped.
pub struct Proxy {
    pub port: u16,
    shared: Arc<Shared>,
}

fn next_random(shared: &Shared) -> f64 {
    let mut x = shared
        .seed
        .fetch_add(0x9E37_79B9_7F4A_7C15, Ordering::Relaxed);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^= x >> 31;
    (x >> 11) as f64 / (1u64 << 53) as f64
}

impl Proxy {
    /// Listens on a free loopback port and forwards to `upstream` (`host:port`).
    pub fn start(upstream: &str) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").expect("proxy bind");
        let port = listener.local_addr().expect("proxy addr").port();
        let shared = Arc::new(Shared {
            mode: Mutex::new(Mode::Pass),
            stop: AtomicBool::new(false),
            seed: AtomicU64::new(0x5eed),
            cuts: AtomicU32::new(0),
            epoch: AtomicU64::new(0),
            conns: Mutex::new(Vec::new()),
        });
        let upstream = upstream.to_string();
        let s = shared.clone();
        listener.set_nonblocking(true).expect("nonblocking");
        std::thread::spawn(move || {
            while !s.stop.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((client, _)) => {
                        let _ = client.set_nonblocking(false);
                        let mode = s.mode.lock().map(|m| *m).unwrap_or(Mode::Pass);
                        if mode == Mode::Down {
                            let _ = client.shutdown(Shutdown::Both);
                            continue;
                        }
                        let Ok(server) = TcpStream::connect(&upstream) else {
                            let _ = client.shutdown(Shutdown::Both);
                            continue;
                        };
                        if let Ok(mut c) = s.conns.lock()
                            && let (Ok(a), Ok(b)) = (client.try_clone(), server.try_clone())
                        {
                            c.push(a);
                            c.push(b);
                        }
                        let cut = Arc::new(AtomicBool::new(false));
                        spawn_pump(
                            client.try_clone().expect("clone"),
                            server.try_clone().expect("clone"),
                            s.clone(),
                            cut.clone(),
                            true,
                        );
                        spawn_pump(server, client, s.clone(), cut, false);
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(2)),
                }
            }
        });
        Proxy { port, shared }
    }

    pub fn addr(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Changes what the proxy does; `Down` also resets every open connection.
    pub fn set(&self, mode: Mode) {
        if let Ok(mut m) = self.shared.mode.lock() {
            *m = mode;
        }
        self.shared.epoch.fetch_add(1, Ordering::Relaxed);
        if mode == Mode::Down
            && let Ok(mut conns) = self.shared.conns.lock()
        {
            for c in conns.drain(..) {
                let _ = c.shutdown(Shutdown::Both);
            }
        }
    }

    /// Connections cut after a request so far.
    pub fn cuts(&self) -> u32 {
        self.shared.cuts.load(Ordering::Relaxed)
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        if let Ok(mut conns) = self.shared.conns.lock() {
            for c in conns.drain(..) {
                let _ = c.shutdown(Shutdown::Both);
            }
        }
    }
}

/// Copies `from` to `to` under the current mode. `requests` marks the client-to-server side.
fn spawn_pump(
    mut from: TcpStream,
    mut to: TcpStream,
    s: Arc<Shared>,
    cut: Arc<AtomicBool>,
    requests: bool,
) {
    std::thread::spawn(move || {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = match from.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            if cut.load(Ordering::SeqCst) {
                break;
            }
            let mode = s.mode.lock().map(|m| *m).unwrap_or(Mode::Pass);
            match mode {
                Mode::Pass => {}
                Mode::Delay(d) => std::thread::sleep(d),
                Mode::BlackHole => continue,
                Mode::Down => break,
                Mode::CutBefore(pattern) => {
                    if requests && buf[..n].windows(pattern.len()).any(|w| w == pattern) {
                        cut.store(true, Ordering::SeqCst);
                        s.cuts.fetch_add(1, Ordering::Relaxed);
                        let _ = from.shutdown(Shutdown::Both);
                        let _ = to.shutdown(Shutdown::Both);
                        break;
                    }
                }
                Mode::CutAfterRequest(p) => {
                    if requests && next_random(&s) < p {
                        // The server gets the request; the client connection dies before any
                        // reply can reach it (the reply pump sees `cut` and drops it).
                        cut.store(true, Ordering::SeqCst);
                        let _ = to.write_all(&buf[..n]);
                        let _ = to.flush();
                        std::thread::sleep(Duration::from_millis(5));
                        s.cuts.fetch_add(1, Ordering::Relaxed);
                        let _ = from.shutdown(Shutdown::Both);
                        let _ = to.shutdown(Shutdown::Both);
                        break;
                    }
                }
            }
            if to.write_all(&buf[..n]).is_err() {
                break;
            }
        }
        let _ = to.shutdown(Shutdown::Both);
        let _ = from.shutdown(Shutdown::Both);
    });
}
