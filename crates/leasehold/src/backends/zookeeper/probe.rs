//! What doctor reads of a ZooKeeper ensemble.

use crate::probe::findings::*;
#[allow(unused_imports)]
use std::time::Duration;

/// A four-letter-word command on `host:port` (often disabled: then `None`).
async fn four(host: &str, cmd: &str) -> Option<String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut s = tokio::time::timeout(Duration::from_secs(2), tokio::net::TcpStream::connect(host))
        .await
        .ok()?
        .ok()?;
    s.write_all(cmd.as_bytes()).await.ok()?;
    let mut out = String::new();
    tokio::time::timeout(Duration::from_secs(2), s.read_to_string(&mut out)).await.ok()?.ok()?;
    (!out.is_empty() && !out.contains("is not executed")).then_some(out)
}

pub(crate) async fn zookeeper(
    cfg: &super::Config,
    r: &mut Probe,
) -> std::result::Result<(), String> {
    let limits = crate::limits::Limits::default();
    let store = super::ZookeeperStore::open(cfg, limits).await.map_err(|e| e.to_string())?;
    let client = store.client().await.map_err(|e| e.to_string())?;
    r.set("negotiated session timeout", format!("{:?}", client.session_timeout()));
    let hosts: Vec<&str> = cfg.hosts.split(',').filter(|h| !h.is_empty()).collect();
    let mut modes = Vec::new();
    for h in &hosts {
        match four(h, "srvr").await {
            Some(out) => {
                let field = |k: &str| {
                    out.lines().find_map(|l| l.strip_prefix(k)).map(|v| v.trim().to_owned())
                };
                let mode = field("Mode:").unwrap_or("?".into());
                r.set(
                    &format!("server {h}"),
                    format!("{mode}, {}", field("Zookeeper version:").unwrap_or("?".into())),
                );
                modes.push(mode);
            }
            None => r.set(&format!("server {h}"), "srvr refused (4lw.commands.whitelist)"),
        }
    }
    let ensemble = match client.get_config().await {
        Ok((data, _)) => {
            String::from_utf8_lossy(&data).lines().filter(|l| l.starts_with("server.")).count()
        }
        Err(_) => 0,
    };
    if ensemble > 0 {
        r.set("ensemble members (/zookeeper/config)", ensemble);
    }
    let size = if ensemble > 0 {
        ensemble
    } else if modes.iter().any(|m| m == "standalone") {
        1
    } else {
        hosts.len()
    };
    if size <= 1 {
        r.verdict(
            "a single (standalone) server: linearizable while it lives; its loss stops every \
             grant, disconnects every holder (admit() false at once, lost() 0.4 x the session \
             timeout later) and, if it comes back after the timeout, expires their sessions",
        );
        r.change(
            "an ensemble of 3 or 5 servers: survive 1 or 2 server losses with no second holder",
        );
    } else {
        r.verdict(format!(
            "an ensemble of {size}: survives the loss of {} server(s); sessions move to a live \
             server within the session timeout",
            (size - 1) / 2
        ));
    }
    r.verdict(
        "a disconnected holder: admit() is false at once; lost() fires if the client is not \
         reconnected within 0.4 x the session timeout, and at once on Expired",
    );
    Ok(())
}
