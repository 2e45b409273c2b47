//! `--scenario partition` on a topology: the holder reaches every member through its own TCP
//! fault proxy; after its first write the proxies of the members the topology cuts
//! ([`Partition::cut`]: a whole ensemble, a minority of instances) swallow its traffic both
//! ways. The successor connects directly. The holder's `admit()` and `lost()` are timed from
//! the cut.

use std::net::SocketAddr;
use std::time::Duration;

use leasehold_harness::proxy::{Fault, FaultProxy};
use leasehold_harness::stores::{
    self,
    topology::{Partition, Partitioned},
};

use super::super::{
    Event, Holder, Settings, Trial, ev, faults, fences, fresh_resource, http, progress,
    session_timeout,
};

/// Runs the partition trials on `name`; the trials, the backend's guarantees and the setup.
pub(in crate::chaos) async fn run(
    s: &Settings,
    p: &'static Partition,
) -> Result<(Vec<Trial>, leasehold::Guarantees, String), String> {
    let mut trials = Vec::new();
    let mut guarantees = None;
    for fenced in [true, false] {
        let count = if fenced { s.trials } else { s.control_trials };
        for n in 0..count {
            progress(s, if fenced { "fenced" } else { "unfenced" }, n, count);
            let (t, g) = trial(s, p, fenced, n).await?;
            trials.push(t);
            guarantees = Some(g);
        }
    }
    let mut setup = p.setup.replace("{session}", &format!("{:?}", session_timeout(&s.url)));
    for arm in ["fenced", "unfenced"] {
        if let Some(line) = super::timing(&trials, arm) {
            setup.push_str(&format!("; {line}"));
        }
    }
    Ok((trials, guarantees.ok_or("no trials were run")?, setup))
}

async fn trial(
    s: &Settings,
    p: &'static Partition,
    fenced: bool,
    n: usize,
) -> Result<(Trial, leasehold::Guarantees), String> {
    let arm = if fenced { "fenced" } else { "unfenced" };
    // The user's options on the private servers (their path, a chroot, is the servers').
    let tail = s.url.path_and_options();
    let opts = tail.find('?').map_or("", |i| &tail[i..]).to_owned();
    let Partitioned { servers, ports, url: direct } =
        faults::blocking(move || (p.start)(&opts)).await?;
    let mut proxies = Vec::new();
    for p in &ports {
        let to: SocketAddr = ([127, 0, 0, 1], *p).into();
        proxies.push(FaultProxy::start(to).await.map_err(|e| e.to_string())?);
    }
    let hosts: Vec<String> = proxies.iter().map(|p| p.addr().to_string()).collect();
    // The direct URL, through the proxies: a new URL, parsed where it is made.
    let direct_url = leasehold::StoreUrl::parse(&direct).map_err(|e| e.to_string())?;
    let holder_url = direct_url.with_hosts(&hosts.join(",")).map_err(|e| e.to_string())?;
    fresh_resource(&s.out);
    let spec = stores::own_resource(&s.out).spec;
    let mut holder = Holder::spawn(s, &holder_url, &spec, fenced).await?;
    let ready = holder.line(s.ttl * 20 + Duration::from_secs(20)).await?;
    let holder_fence: u64 = ready
        .strip_prefix("ready ")
        .and_then(|f| f.parse().ok())
        .ok_or_else(|| format!("the holder said {ready:?}"))?;
    let mut events = Vec::new();
    for &i in p.cut {
        proxies[i].set(Fault::Blackhole);
    }
    events.push(ev("chaos", "pause", Some(holder_fence), Some(p.what.into())));
    let locker = fences::connect(&direct).await.map_err(|e| e.to_string())?;
    let guarantees = locker.guarantees();
    let mut res = http::open(&spec).await;
    let wait = s.ttl * 4 + session_timeout(&s.url).mul_f64(1.5) + Duration::from_secs(3);
    let (successor_fence, final_value, said) = faults::successor_round(
        &locker,
        &mut res,
        &mut holder,
        s,
        wait,
        fenced,
        holder_fence,
        &mut events,
    )
    .await;
    for p in &proxies {
        p.set(Fault::Reset);
    }
    holder.finish().await;
    events.append(&mut holder.events);
    events.sort_by_key(|e: &Event| e.t_ns);
    drop(proxies);
    let _ = faults::blocking(move || drop(servers)).await;
    let mut t = Trial::checked(arm, n, holder_fence, successor_fence, said, final_value, events);
    let at = |who: &str, what: &str| {
        t.events.iter().find(|e| e.who == who && e.what == what).map(|e| e.t_ns)
    };
    if let (Some(r), Some(g)) = (at("holder", "releasing"), at("successor", "acquire"))
        && r < g
    {
        // Granted only after the holder's release (it kept a majority): its later lost() is
        // the release's, not the partition's.
        t.lost_lead_ms = None;
    }
    Ok((t, guarantees))
}
