//! Our nodes on the server: the create of a protected ephemeral sequential node (Curator's
//! protection mode: after a lost answer, look for our UUID before creating again), and what
//! removes it when the acquire that made it hands out no grant.

use std::sync::Arc;
use std::time::Duration;

use zookeeper_client::{Acls, Client, CreateMode};

use super::{session_gone, zk_err};
use crate::backends::session::Undoing;
use crate::{Error, Result};

type CreateTask =
    tokio::task::JoinHandle<std::result::Result<(String, i64), zookeeper_client::Error>>;

/// The create of our node, run in a task of its own, and what removes the node if the acquire
/// does not hand out a grant (after the create has settled).
pub(super) struct CreateGuard {
    pub(super) task: Option<CreateTask>,
    pub(super) armed: Option<(Client, Arc<Undoing>, String, String)>,
    pub(super) path: Option<String>,
}

impl CreateGuard {
    /// The node's path and czxid, recovering it by name after a connection loss.
    pub(super) async fn outcome(&mut self) -> Result<(String, i64)> {
        let task = self.task.as_mut().expect("awaited once");
        let r = task.await;
        self.task = None;
        let (path, czxid) = match r {
            Ok(Ok(v)) => v,
            Ok(Err(e)) => return Err(zk_err("create", e)),
            Err(e) => return Err(Error::UnknownOutcome(format!("zookeeper create task: {e}"))),
        };
        self.path = Some(path.clone());
        Ok((path, czxid))
    }

    pub(super) fn disarm(&mut self) {
        self.armed = None;
    }

    pub(super) async fn undo_now(&mut self) -> Result<()> {
        let Some((client, _, lock, owner)) = self.armed.take() else { return Ok(()) };
        remove_own(&client, &lock, &owner, self.path.as_deref()).await
    }
}

impl Drop for CreateGuard {
    fn drop(&mut self) {
        let Some((client, undoing, lock, owner)) = self.armed.take() else { return };
        let (task, known) = (self.task.take(), self.path.take());
        let Ok(rt) = tokio::runtime::Handle::try_current() else { return };
        // A release of this lock waits for the removal, so the node it frees cannot be taken
        // (and kept) by this abandoned place in the queue.
        undoing.start(&lock);
        rt.spawn(async move {
            let mut known = known;
            if let Some(task) = task
                && let Ok(Ok(Ok((path, _)))) =
                    tokio::time::timeout(Duration::from_secs(30), task).await
            {
                known = Some(path);
            }
            for attempt in 0..10u32 {
                match remove_own(&client, &lock, &owner, known.as_deref()).await {
                    Ok(()) => break,
                    Err(e) => {
                        tracing::warn!(
                            "removing an abandoned zookeeper node under {lock} failed: {e}"
                        );
                        tokio::time::sleep(Duration::from_millis(100 << attempt.min(5))).await;
                    }
                }
            }
            undoing.finish(&lock);
        });
    }
}

/// Deletes our node under `lock`: `path` if known, else whichever child carries our UUID.
pub(super) async fn remove_own(
    client: &Client,
    lock: &str,
    uuid: &str,
    path: Option<&str>,
) -> Result<()> {
    let path = match path {
        Some(p) => p.to_owned(),
        None => match find_own(client, lock, uuid).await? {
            Some(p) => p,
            None => return Ok(()),
        },
    };
    match client.delete(&path, None).await {
        Ok(()) | Err(zookeeper_client::Error::NoNode) => Ok(()),
        // The session is over, and its ephemeral node with it.
        Err(e) if session_gone(&e) => Ok(()),
        Err(e) => Err(zk_err("delete", e)),
    }
}

pub(super) async fn find_own(client: &Client, lock: &str, uuid: &str) -> Result<Option<String>> {
    let marker = format!("_c_{uuid}-");
    match client.list_children(lock).await {
        Ok(children) => {
            Ok(children.into_iter().find(|c| c.starts_with(&marker)).map(|c| format!("{lock}/{c}")))
        }
        Err(zookeeper_client::Error::NoNode) => Ok(None),
        Err(e) => Err(zk_err("list children", e)),
    }
}

/// Whether a failed request may still have been applied (the answer was lost, not refused).
pub(super) fn uncertain(e: &zookeeper_client::Error) -> bool {
    use zookeeper_client::Error as E;
    !matches!(
        e,
        E::NoNode
            | E::NodeExists
            | E::NoAuth
            | E::InvalidAcl
            | E::NoChildrenForEphemerals
            | E::BadArguments(_)
            | E::SessionExpired
            | E::AuthFailed
            | E::ClientClosed
    )
}

/// Creates our protected ephemeral sequential node under `lock` (making the lock node when
/// missing); after a lost answer, finds it by UUID before creating another (Curator's
/// protection mode). Runs until it knows; the caller bounds it in time.
pub(super) async fn create_node(
    client: Client,
    lock: String,
    uuid: String,
    marker: &'static str,
    data: String,
) -> std::result::Result<(String, i64), zookeeper_client::Error> {
    let prefix = format!("{lock}/_c_{uuid}-{marker}");
    let marker = format!("_c_{uuid}-");
    let node = CreateMode::EphemeralSequential.with_acls(Acls::anyone_all());
    let dir = CreateMode::Container.with_acls(Acls::anyone_all());
    let mut maybe_applied = false;
    loop {
        if maybe_applied {
            // The last create may have been applied: look for our node before trying again.
            match client.list_children(&lock).await {
                Ok(children) => {
                    if let Some(c) = children.into_iter().find(|c| c.starts_with(&marker)) {
                        let path = format!("{lock}/{c}");
                        match client.check_stat(&path).await {
                            Ok(Some(stat)) => return Ok((path, stat.czxid)),
                            Ok(None) => {}
                            Err(e) if uncertain(&e) => {
                                tokio::time::sleep(Duration::from_millis(50)).await;
                                continue;
                            }
                            Err(e) => return Err(e),
                        }
                    }
                }
                Err(zookeeper_client::Error::NoNode) => {}
                Err(e) if uncertain(&e) => {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
                Err(e) => return Err(e),
            }
            maybe_applied = false;
        }
        match client.create(&prefix, data.as_bytes(), &node).await {
            Ok((stat, seq)) => return Ok((format!("{prefix}{seq}"), stat.czxid)),
            Err(zookeeper_client::Error::NoNode) => match client.mkdir(&lock, &dir).await {
                Ok(()) | Err(zookeeper_client::Error::NodeExists) => continue,
                Err(e) => return Err(e),
            },
            Err(e) if uncertain(&e) => {
                tracing::debug!(
                    "zookeeper create under {lock} got no answer ({e}); looking for it"
                );
                maybe_applied = true;
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => return Err(e),
        }
    }
}
