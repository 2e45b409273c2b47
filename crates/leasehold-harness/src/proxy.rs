//! A TCP fault proxy: sits between a client and a store on loopback and, on command, passes
//! traffic, delays it, swallows it (a partition: nothing arrives, nothing is refused), swallows
//! only the store's replies (requests take effect, their answers never come), or resets every
//! connection.

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
    /// Forward the client's requests, drop the store's replies: every request takes effect
    /// and its outcome stays unknown to the client. A connection that lost replies is out of
    /// step with its protocol; end it with [`Fault::Reset`], never by going back to `Pass`.
    DropReplies,
    /// As `DropReplies`, after letting this many reply chunks (on loopback, about one per
    /// reply) through from the moment it is set: reaches the later round trips of a
    /// multi-step protocol (a transaction's COMMIT, say).
    DropRepliesAfter(u32),
}

impl Fault {
    fn encode(self) -> u64 {
        match self {
            Fault::Pass => 0,
            Fault::Blackhole => 1,
            Fault::Reset => 2,
            Fault::DropReplies => 3,
            Fault::Latency(d) => 4 | ((d.as_micros() as u64) << 3),
            Fault::DropRepliesAfter(n) => 5 | (u64::from(n) << 3),
        }
    }

    fn decode(v: u64) -> Fault {
        match v & 7 {
            0 => Fault::Pass,
            1 => Fault::Blackhole,
            2 => Fault::Reset,
            3 => Fault::DropReplies,
            5 => Fault::DropRepliesAfter((v >> 3) as u32),
            _ => Fault::Latency(Duration::from_micros(v >> 3)),
        }
    }
}

/// A running proxy; stops accepting when dropped (open connections end with their peers).
pub struct FaultProxy {
    addr: SocketAddr,
    fault: Arc<AtomicU64>,
    /// Reply chunks seen since the fault was last set (for `DropRepliesAfter`).
    replies: Arc<AtomicU64>,
    task: tokio::task::JoinHandle<()>,
}

impl FaultProxy {
    /// Listens on a free 127.0.0.1 port and forwards to `upstream`. Needs a tokio runtime.
    pub async fn start(upstream: SocketAddr) -> std::io::Result<FaultProxy> {
        assert!(upstream.ip().is_loopback(), "the fault proxy only forwards to loopback");
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let fault = Arc::new(AtomicU64::new(Fault::Pass.encode()));
        let replies = Arc::new(AtomicU64::new(0));
        let (f, seen) = (fault.clone(), replies.clone());
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let (f, seen) = (f.clone(), seen.clone());
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
                        _ = pump(cr, sw, f.clone(), None) => {}
                        _ = pump(sr, cw, f, Some(seen)) => {}
                    }
                });
            }
        });
        Ok(FaultProxy { addr, fault, replies, task })
    }

    /// Where clients connect.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Changes what happens to traffic from now on (for open connections too).
    pub fn set(&self, fault: Fault) {
        self.replies.store(0, Ordering::SeqCst);
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
    // The store-to-client direction, with its count of reply chunks.
    replies: Option<Arc<AtomicU64>>,
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
            Fault::DropReplies if replies.is_some() => continue,
            Fault::DropRepliesAfter(n)
                if replies
                    .as_ref()
                    .is_some_and(|seen| seen.fetch_add(1, Ordering::SeqCst) >= u64::from(n)) =>
            {
                continue;
            }
            Fault::DropRepliesAfter(_) => {}
            Fault::DropReplies => {}
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
        let echoed = Arc::new(AtomicU64::new(0));
        let seen = echoed.clone();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = echo.accept().await {
                let seen = seen.clone();
                tokio::spawn(async move {
                    let mut b = [0u8; 64];
                    while let Ok(n) = s.read(&mut b).await {
                        seen.fetch_add(n as u64, Ordering::SeqCst);
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
        p.set(Fault::Latency(Duration::from_millis(30)));
        c.write_all(b"slow").await.unwrap();
        c.read_exact(&mut b).await.unwrap();
        assert_eq!(&b, b"slow");
        // The echo server gets the request (it echoes it) but the reply is dropped.
        p.set(Fault::DropReplies);
        c.write_all(b"half").await.unwrap();
        let r = tokio::time::timeout(Duration::from_millis(300), c.read(&mut b)).await;
        assert!(r.is_err(), "a reply came through DropReplies");
        assert_eq!(echoed.load(Ordering::SeqCst), 12, "the request did not reach the server");
        p.set(Fault::Reset);
        let r = tokio::time::timeout(Duration::from_secs(2), c.read(&mut b)).await.unwrap();
        assert!(matches!(r, Ok(0) | Err(_)), "the connection was not closed: {r:?}");
        // One reply through, then none.
        p.set(Fault::Pass);
        let mut c = TcpStream::connect(p.addr()).await.unwrap();
        p.set(Fault::DropRepliesAfter(1));
        c.write_all(b"one!").await.unwrap();
        c.read_exact(&mut b).await.unwrap();
        assert_eq!(&b, b"one!");
        c.write_all(b"two!").await.unwrap();
        let r = tokio::time::timeout(Duration::from_millis(300), c.read(&mut b)).await;
        assert!(r.is_err(), "the second reply came through DropRepliesAfter(1)");
        assert_eq!(echoed.load(Ordering::SeqCst), 20, "the requests did not reach the server");
        p.set(Fault::Blackhole);
        c.write_all(b"lost").await.unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert_eq!(echoed.load(Ordering::SeqCst), 20, "a blackholed request reached the server");
        let r = tokio::time::timeout(Duration::from_millis(300), c.read(&mut b)).await;
        assert!(r.is_err(), "a blackholed connection answered");
        p.set(Fault::Reset);
        let r = tokio::time::timeout(Duration::from_secs(2), c.read(&mut b)).await.unwrap();
        assert!(matches!(r, Ok(0) | Err(_)), "the connection was not closed: {r:?}");
    }
}
