//! An HTTP service guarded by the fence layer.
//!
//!     cargo run -p leasehold-examples --bin http-fence-layer
//!
//! The service (axum, on a free loopback port) stores one document; its PUT route sits behind
//! `FenceLayer`, which admits a request only under the newest grant of the lock `doc:42` that
//! the lock store confirms. Two clients take the lock one after the other; the first one's late
//! PUT is answered 409 with the reason, and the document keeps the second one's body. A forged
//! huge token gets 403 and installs nothing; a PUT without fencing headers gets 428.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::routing::put;
use leasehold::fence::http::{FenceGuard, FenceLayer, request_headers};
use leasehold::{Key, Locker, Wait};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

type Doc = Arc<Mutex<String>>;

async fn store_doc(State(doc): State<Doc>, body: String) -> String {
    *doc.lock().unwrap() = body;
    "stored\n".into()
}

/// A minimal HTTP/1.1 client (one request per connection), enough for the demo.
async fn send(
    addr: std::net::SocketAddr,
    fencing: Option<&leasehold::fence::Fencing>,
    body: &str,
) -> String {
    let mut headers = String::new();
    if let Some(f) = fencing {
        for (k, v) in request_headers(f) {
            headers.push_str(&format!("{k}: {}\r\n", v.to_str().unwrap()));
        }
    }
    let req = format!(
        "PUT /doc HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\ncontent-length: {}\r\n{headers}\r\n{body}",
        body.len()
    );
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(req.as_bytes()).await.unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).await.unwrap();
    let status = out.lines().next().unwrap_or("").to_owned();
    let body = out.split("\r\n\r\n").nth(1).unwrap_or("").trim().to_owned();
    format!("{status} — {body}")
}

#[tokio::main]
async fn main() -> leasehold::Result<()> {
    let dir = tempfile::tempdir().unwrap();
    let locker = Locker::connect(&format!("sqlite://{}/leases.db", dir.path().display())).await?;
    let doc: Doc = Arc::default();
    // The guard confirms each newer grant with the store the holders lock on.
    let guard = FenceGuard::new(Key::new("doc:42")?, locker.store().clone())?;
    let app = Router::new()
        .route("/doc", put(store_doc))
        .layer(FenceLayer::new(guard.clone()))
        .with_state(doc.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });

    println!("no headers:        {}", send(addr, None, "anonymous").await);
    let a = locker.acquire("doc:42", Duration::from_secs(1)).await?;
    let fa = a.fencing();
    println!("A (fence {}):      {}", fa.token(), send(addr, Some(&fa), "from A").await);
    let forged = leasehold::fence::Fencing::new(
        Key::new("doc:42")?,
        leasehold::FenceToken::new(u64::MAX),
        leasehold::OwnerToken::generate()?,
    );
    let res = send(addr, Some(&forged), "forged").await;
    println!("forged (fence {}): {res}", u64::MAX);
    assert!(res.contains("403"), "{res}");
    drop(a.detach()); // A stalls: no renewals, no release
    let b = locker
        .acquire("doc:42", Duration::from_secs(30))
        .wait(Wait::For(Duration::from_secs(10)))
        .await?;
    let fb = b.fencing();
    println!("B (fence {}):      {}", fb.token(), send(addr, Some(&fb), "from B").await);
    let late = send(addr, Some(&fa), "late from A").await;
    println!("A again (fence {}): {late}", fa.token());
    assert!(late.contains("409"), "{late}");
    let other = locker.acquire("doc:7", Duration::from_secs(30)).await?;
    println!("a doc:7 token:     {}", send(addr, Some(&other.fencing()), "wrong key").await);
    println!("document: {:?} (installed fence {})", doc.lock().unwrap(), guard.installed());
    assert_eq!(*doc.lock().unwrap(), "from B");
    assert!(b.release().await?.is_clean(), "B held its lease throughout");
    assert!(other.release().await?.is_clean(), "so did the other key's holder");
    Ok(())
}
