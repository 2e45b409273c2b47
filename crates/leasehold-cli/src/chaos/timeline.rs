//! `timeline.svg`: the first trials of each arm drawn on one time axis.

use super::{Event, Report, Scenario, Trial};

/// A timeline of the first trials of each arm: per trial, the holder's lease (from acquire
/// to lost/release) with its frozen stretch hatched, the successor's lease, and every effect
/// (green dot: accepted; red cross: refused by the resource).
pub(super) fn timeline(r: &Report) -> String {
    let trials = &r.trials;
    use crate::svg::esc;
    use std::fmt::Write;
    let mut names: Vec<&str> = Vec::new();
    for t in trials {
        if !names.contains(&t.arm) {
            names.push(t.arm);
        }
    }
    let shown: Vec<&Trial> =
        names.iter().flat_map(|arm| trials.iter().filter(move |t| t.arm == *arm).take(6)).collect();
    let unknown = r.scenario == Scenario::UnknownAcquire;
    let (holder_bar, hatched) = match r.scenario {
        Scenario::Partition => ("holder lease", "cut off from the store"),
        Scenario::StoreKill => ("holder lease", "store killed until restarted"),
        Scenario::Failover => {
            ("holder lease", "from the primary's loss to the successor's first try")
        }
        Scenario::UnknownAcquire => (
            "the grant whose answer was lost, from the request until the observer got the key",
            "replies dropped / link cut",
        ),
        _ => ("holder lease", "SIGSTOPped"),
    };
    let lane = 16.0;
    let row = lane * 2.0 + 14.0;
    let (left, top, width) = (150.0, 50.0, 900.0);
    let span_ms = shown
        .iter()
        .map(|t| {
            let t0 = t.events.first().map_or(0, |e| e.t_ns);
            let t1 = t.events.last().map_or(0, |e| e.t_ns);
            (t1 - t0) as f64 / 1e6
        })
        .fold(1.0, f64::max);
    let x = |ms: f64| left + width * ms / span_ms;
    let h = top + row * shown.len() as f64 + 60.0;
    let mut s = String::new();
    let _ = write!(
        s,
        r##"<svg xmlns="http://www.w3.org/2000/svg" width="{}" height="{h}" font-family="sans-serif" font-size="11"><rect width="100%" height="100%" fill="white"/><defs><pattern id="hatch" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><line x1="0" y1="0" x2="0" y2="6" stroke="#888" stroke-width="2"/></pattern></defs><text x="10" y="20" font-size="14">{} — {}, first trials per arm (time from the holder's acquire, ms)</text><text x="10" y="38">{}: blue bar, to its lost() or release (hatched: {}) · {} lease: orange bar · effect: green dot accepted, red ✕ refused by the resource (a successor's: locked out)</text>"##,
        left + width + 40.0,
        esc(&r.store),
        esc(&r.scenario.to_string()),
        holder_bar,
        hatched,
        if unknown { "observer" } else { "successor" }
    );
    for (i, t) in shown.iter().enumerate() {
        let y0 = top + row * i as f64;
        let t0 = t.events.first().map_or(0, |e| e.t_ns);
        let ms = |e: &Event| (e.t_ns - t0) as f64 / 1e6;
        let find = |who: &str, what: &str| t.events.iter().find(|e| e.who == who && e.what == what);
        let end = t.events.last().map_or(0.0, ms);
        let _ = write!(
            s,
            r##"<text x="10" y="{:.1}">{} #{}</text><text x="10" y="{:.1}" fill="#666">fences {} → {}</text>"##,
            y0 + lane - 3.0,
            t.arm,
            t.n + 1,
            y0 + 2.0 * lane - 3.0,
            t.holder_fence,
            t.successor_fence.map_or("-".into(), |f| f.to_string())
        );
        // Holder lease: acquire → lost/release.
        let start = find("holder", "acquire").map_or(0.0, ms);
        let stop = find("holder", "lost")
            .or_else(|| find("holder", "release"))
            .or_else(|| if unknown { find("successor", "acquire") } else { None })
            .map_or(end, ms);
        let _ = write!(
            s,
            r##"<rect x="{:.1}" y="{y0:.1}" width="{:.1}" height="{}" fill="#1f77b4" opacity="0.55"><title>holder lease, fence {}</title></rect>"##,
            x(start),
            (x(stop) - x(start)).max(1.0),
            lane - 3.0,
            t.holder_fence
        );
        if let (Some(p), Some(c)) = (find("chaos", "pause"), find("chaos", "resume")) {
            let _ = write!(
                s,
                r##"<rect x="{:.1}" y="{y0:.1}" width="{:.1}" height="{}" fill="url(#hatch)"><title>{hatched}</title></rect>"##,
                x(ms(p)),
                (x(ms(c)) - x(ms(p))).max(1.0),
                lane - 3.0
            );
        }
        if let Some(a) = find("successor", "acquire") {
            let rel = find("successor", "release").map_or(end, ms);
            let _ = write!(
                s,
                r##"<rect x="{:.1}" y="{:.1}" width="{:.1}" height="{}" fill="#ff7f0e" opacity="0.6"><title>successor lease, fence {}</title></rect>"##,
                x(ms(a)),
                y0 + lane,
                (x(rel) - x(ms(a))).max(1.0),
                lane - 3.0,
                a.fence.unwrap_or(0)
            );
        }
        for e in t.events.iter().filter(|e| e.what == "effect" || e.what == "claim-refused") {
            let yy = y0 + if e.who == "holder" { lane / 2.0 } else { lane * 1.5 } - 1.5;
            let ok = e.what == "effect"
                && e.detail.as_deref().is_some_and(|d| d.starts_with("accepted"));
            let xx = x(ms(e));
            let tip = esc(&format!(
                "{} {} with fence {}: {}",
                e.who,
                if e.what == "effect" { "effect" } else { "claim refused" },
                e.fence.unwrap_or(0),
                e.detail.clone().unwrap_or_default()
            ));
            if ok {
                let _ = write!(
                    s,
                    r##"<circle cx="{xx:.1}" cy="{yy:.1}" r="4" fill="#2ca02c"><title>{tip}</title></circle>"##
                );
            } else {
                let _ = write!(
                    s,
                    r##"<g stroke="#d62728" stroke-width="2.5"><title>{tip}</title><line x1="{:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}"/><line x1="{:.1}" y1="{:.1}" x2="{:.1}" y2="{:.1}"/></g>"##,
                    xx - 4.0,
                    yy - 4.0,
                    xx + 4.0,
                    yy + 4.0,
                    xx - 4.0,
                    yy + 4.0,
                    xx + 4.0,
                    yy - 4.0
                );
            }
        }
    }
    for (i, t) in shown.iter().enumerate() {
        let found: Vec<&str> = [
            (t.stale_effect_accepted, "STALE EFFECT ACCEPTED"),
            (t.successor_locked_out, "SUCCESSOR LOCKED OUT"),
        ]
        .into_iter()
        .filter_map(|(bad, what)| bad.then_some(what))
        .collect();
        if !found.is_empty() {
            let _ = write!(
                s,
                r##"<text x="{:.1}" y="{:.1}" text-anchor="end" fill="#d62728" font-weight="bold">{}</text>"##,
                left + width,
                top + row * i as f64 + 2.0 * lane + 9.0,
                found.join(" · ")
            );
        }
    }
    let ay = top + row * shown.len() as f64 + 10.0;
    for (m, label) in crate::svg::ticks(0.0, span_ms, 5) {
        let _ = write!(
            s,
            r##"<line x1="{0:.1}" x2="{0:.1}" y1="{top}" y2="{ay:.1}" stroke="#eee"/><text x="{0:.1}" y="{1:.1}" text-anchor="middle">{label}</text>"##,
            x(m),
            ay + 14.0,
        );
    }
    s.push_str("</svg>\n");
    s
}
