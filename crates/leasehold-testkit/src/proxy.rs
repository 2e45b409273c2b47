//! A TCP fault proxy: sits between a client and a store on loopback and, on command, passes
//! traffic, delays it, swallows it (a partition: nothing arrives, nothing is refused), or
//! resets every connection.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// What the proxy does with traffic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// Forward everything.
    Pass,
    /// Forward after this delay per chunk, each way.
    Latency(Duration),
    /// Read and drop everything, both ways; connections stay open.
    Blackhole,
    /// Close every connection (new ones are accepted and closed at once).
    Reset,
}

impl Fault {
    fn encode(self) -> u64 {
        match self {
            Fault::Pass => 0,
            Fault::Blackhole => 1,
            Fault::Reset => 2,
            Fault::Latency(d) => 3 | ((d.as_micros() as u64) << 2),
        }
    }

    fn decode(v: u64) -> Fault {
        match v & 3 {
            0 => Fault::Pass,
            1 => Fault::Blackhole,
            2 => Fault::Reset,
            _ => Fault::Latency(Duration::from_micros(v >> 2)),
        }
    }
}

/// A running proxy; stops accepting when dropped (open connections end with their peers).
pub struct FaultProxy {
    addr: SocketAddr,
    fault: Arc<AtomicU64>,
    task: tokio::task::JoinHandle<()>,
}

impl FaultProxy {
    /// Listens on a free 127.0.0.1 port and forwards to `upstream`. Needs a tokio runtime.
    pub async fn start(upstream: SocketAddr) -> std::io::Result<FaultProxy> {
        assert!(upstream.ip().is_loopback(), "the fault proxy only forwards to loopback");
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let fault = Arc::new(AtomicU64::new(Fault::Pass.encode()));
        let f = fault.clone();
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let f = f.clone();
                tokio::spawn(async move {
                    if Fault::decode(f.load(Ordering::SeqCst)) == Fault::Reset {
                        return;
                    }
                    let Ok(server) = TcpStream::connect(upstream).await else { return };
                    let _ = client.set_nodelay(true);
                    let _ = server.set_nodelay(true);
                    let (cr, cw) = client.into_split();
                    let (sr, sw) = server.into_split();
                    tokio::select! {
                        _ = pump(cr, sw, f.clone()) => {}
                        _ = pump(sr, cw, f) => {}
                    }
                });
            }
        });
        Ok(FaultProxy { addr, fault, task })
    }

    /// Where clients connect.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Changes what happens to traffic from now on (for open connections too).
    pub fn set(&self, fault: Fault) {
        self.fault.store(fault.encode(), Ordering::SeqCst);
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    fault: Arc<AtomicU64>,
) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        // Wake now and then even without traffic, so a Reset closes idle connections too.
        let n = match tokio::time::timeout(Duration::from_millis(50), from.read(&mut buf)).await {
            Err(_) => {
                if Fault::decode(fault.load(Ordering::SeqCst)) == Fault::Reset {
                    return;
                }
                continue;
            }
            Ok(Ok(0)) | Ok(Err(_)) => return,
            Ok(Ok(n)) => n,
        };
        match Fault::decode(fault.load(Ordering::SeqCst)) {
            Fault::Pass => {}
            Fault::Latency(d) => tokio::time::sleep(d).await,
            Fault::Blackhole => continue,
            Fault::Reset => return,
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn passes_delays_swallows_and_resets() {
        let echo = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let upstream = echo.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = echo.accept().await {
                tokio::spawn(async move {
                    let mut b = [0u8; 64];
                    while let Ok(n) = s.read(&mut b).await {
                        if n == 0 || s.write_all(&b[..n]).await.is_err() {
                            break;
                        }
                    }
                });
            }
        });
        let p = FaultProxy::start(upstream).await.unwrap();
        let mut c = TcpStream::connect(p.addr()).await.unwrap();
        let mut b = [0u8; 4];
        c.write_all(b"ping").await.unwrap();
        c.read_exact(&mut b).await.unwrap();
        assert_eq!(&b, b"ping");
        p.set(Fault::Blackhole);
        c.write_all(b"lost").await.unwrap();
        let r = tokio::time::timeout(Duration::from_millis(300), c.read(&mut b)).await;
        assert!(r.is_err(), "a blackholed connection answered");
        p.set(Fault::Reset);
        let r = tokio::time::timeout(Duration::from_secs(2), c.read(&mut b)).await.unwrap();
        assert!(matches!(r, Ok(0) | Err(_)), "the connection was not closed: {r:?}");
    }
}
