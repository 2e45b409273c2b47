//! `leasehold status`: who holds which key, as a table or JSON; a short owner id unless the
//! full token (which lets `release --owner` end the lease) is asked for.

use crate::exit::Exit;
use crate::opts::{StoreOpt, TimeoutOpt};
use crate::{dur, store};
use leasehold::OwnerToken;
use std::time::Duration;

/// How to print.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Show {
    pub json: bool,
    pub show_owner: bool,
}

/// The first 8 hex digits of an owner token: enough to tell holders apart in a listing, not
/// enough to release someone else's lease.
pub(crate) fn short_owner(owner: &OwnerToken) -> String {
    owner.to_string().chars().take(8).collect()
}

/// `s` with backslashes and control characters escaped (`\n`, `\t`, `\u{1b}`), so a key or a
/// command can never break a line of the table or drive the terminal.
pub(crate) fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for ch in s.chars() {
        match ch {
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => out.extend(c.escape_default()),
            c => out.push(c),
        }
    }
    out
}

fn ago(since_ms: u64) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    match now.checked_sub(since_ms) {
        Some(ms) => format!("{} ago", dur::human(Duration::from_millis(ms))),
        None => "just now".into(),
    }
}

/// One holder in `status --json`.
#[derive(serde::Serialize)]
struct Row<'a> {
    key: &'a str,
    /// The owner token's first 8 characters.
    owner_id: String,
    fence: Option<u64>,
    /// Milliseconds.
    expires_in: Option<u64>,
    info: &'a Option<leasehold::HolderInfo>,
    /// `shared` for a reader; absent for the exclusive holder.
    #[serde(skip_serializing_if = "Option::is_none")]
    mode: Option<&'static str>,
    /// A semaphore permit's slot.
    #[serde(skip_serializing_if = "Option::is_none")]
    slot: Option<u32>,
    /// The full owner token, with `--show-owner`.
    #[serde(skip_serializing_if = "Option::is_none")]
    owner: Option<String>,
}

/// A key held by another session, whose owner the server does not know.
#[derive(serde::Serialize)]
struct SessionRow<'a> {
    key: &'a str,
    owner_id: Option<String>,
    held_by: &'static str,
}

fn row_json(h: &leasehold::Holder, show_owner: bool) -> Row<'_> {
    Row {
        key: h.key.as_str(),
        owner_id: short_owner(&h.owner),
        fence: h.fence.map(|f| f.get()),
        expires_in: h.expires_in.map(|d| d.as_millis() as u64),
        info: &h.info,
        mode: (h.mode == leasehold::Mode::Shared).then_some("shared"),
        slot: slot_of(h.key.as_str()).map(|(_, slot)| slot),
        owner: show_owner.then(|| h.owner.to_string()),
    }
}

/// `rows` as JSON (they are plain data: serializing cannot fail).
fn to_json(rows: &impl serde::Serialize) -> String {
    serde_json::to_string(rows).expect("status rows serialize")
}

pub(crate) async fn status(
    store: StoreOpt,
    TimeoutOpt { timeout }: TimeoutOpt,
    show: Show,
    key: Option<String>,
) -> Result<Exit, Exit> {
    let (store, locker) = store::open(&store, timeout).await?;
    if let Some(note) = store.scope_note() {
        eprintln!("{note}");
    }
    let holders = match locker.holders(key.as_deref()).await {
        // A session lock held by another process: the server knows the session, not the
        // owner token.
        Err(leasehold::Error::Busy { key }) => {
            if show.json {
                let row =
                    SessionRow { key: key.as_str(), owner_id: None, held_by: "another session" };
                println!("{}", to_json(&[row]));
            } else {
                println!(
                    "{}: held by another session (its owner is not known to the server)",
                    escape(key.as_str())
                );
            }
            return Ok(Exit::ok(0));
        }
        r => r?,
    };
    // A semaphore's permits are held as slots KEY#0 … KEY#(N-1): list them with KEY.
    let mut holders = holders;
    if let Some(k) = key.as_deref()
        && let Ok(all) = locker.holders(None).await
    {
        holders.extend(
            all.into_iter().filter(|h| slot_of(h.key.as_str()).is_some_and(|(s, _)| s == k)),
        );
    }
    if show.json {
        let rows: Vec<Row> = holders.iter().map(|h| row_json(h, show.show_owner)).collect();
        println!("{}", to_json(&rows));
        return Ok(Exit::ok(0));
    }
    if holders.is_empty() {
        eprintln!("no holders");
        return Ok(Exit::ok(0));
    }
    print!("{}", table(&holders, show.show_owner));
    Ok(Exit::ok(0))
}

/// `(semaphore, slot)` of a slot key `KEY#N`.
fn slot_of(key: &str) -> Option<(&str, u32)> {
    let (sem, n) = key.rsplit_once('#')?;
    let slot = n.parse().ok().filter(|_| n.bytes().all(|b| b.is_ascii_digit()))?;
    Some((sem, slot))
}

/// The holders as aligned columns, one line each whatever the keys hold.
fn table(holders: &[leasehold::Holder], show_owner: bool) -> String {
    use std::fmt::Write;
    let rows: Vec<[String; 8]> = holders
        .iter()
        .map(|h| {
            let (host, pid, since, cmd) = match &h.info {
                Some(i) => {
                    (escape(&i.host), i.pid.to_string(), ago(i.since_ms), escape(&i.command))
                }
                None => ("-".into(), "-".into(), "-".into(), "-".into()),
            };
            let owner = if show_owner { h.owner.to_string() } else { short_owner(&h.owner) };
            let key = match (h.mode, slot_of(h.key.as_str())) {
                (leasehold::Mode::Shared, _) => format!("{} (reader)", escape(h.key.as_str())),
                (_, Some((sem, slot))) => {
                    format!("{} (permit {slot} of {})", escape(h.key.as_str()), escape(sem))
                }
                _ => escape(h.key.as_str()),
            };
            [
                key,
                owner,
                h.fence.map_or_else(|| "-".to_string(), |f| f.to_string()),
                h.expires_in.map_or_else(|| "session".to_string(), dur::human),
                host,
                pid,
                since,
                cmd,
            ]
        })
        .collect();
    let head = ["KEY", "OWNER", "FENCE", "TIME LEFT", "HOST", "PID", "SINCE", "COMMAND"];
    let mut w = head.map(|h| h.chars().count());
    for r in &rows {
        for (i, c) in r.iter().enumerate() {
            w[i] = w[i].max(c.chars().count());
        }
    }
    let mut out = String::new();
    for r in std::iter::once(head.map(String::from)).chain(rows) {
        let line = format!(
            "{:<w0$}  {:<w1$}  {:>w2$}  {:<w3$}  {:<w4$}  {:>w5$}  {:<w6$}  {}",
            r[0],
            r[1],
            r[2],
            r[3],
            r[4],
            r[5],
            r[6],
            r[7],
            w0 = w[0],
            w1 = w[1],
            w2 = w[2],
            w3 = w[3],
            w4 = w[4],
            w5 = w[5],
            w6 = w[6],
        );
        let _ = writeln!(out, "{}", line.trim_end());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_escaped() {
        assert_eq!(escape("a\nb\tc\u{1b}[31m\\"), "a\\nb\\tc\\u{1b}[31m\\\\");
        assert_eq!(escape("plain-ключ"), "plain-ключ");
    }
}
