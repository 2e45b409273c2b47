//! Durations on the command line, in the one syntax every store option uses too: `500ms`,
//! `30s`, `2m`, `1h`, combinations like `1m30s`, and a bare `0`.

use std::time::Duration;

/// Parses a duration in the library's one syntax ([`leasehold::parse_duration`]); the error
/// is one line for the user.
pub fn parse(s: &str) -> Result<Duration, String> {
    if let Some(rest) = s.strip_prefix('-') {
        return Err(format!("{s:?} is negative: a duration is 0 or more (e.g. {rest})"));
    }
    leasehold::parse_duration(s).map_err(|e| match e {
        leasehold::Error::InvalidInput(m) => m,
        other => other.to_string(),
    })
}

/// [`parse`], refusing zero.
pub fn parse_positive(s: &str) -> Result<Duration, String> {
    match parse(s)? {
        d if d.is_zero() => Err(format!("{s:?} is zero: it must be positive")),
        d => Ok(d),
    }
}

/// Human form for tables: `850ms`, `12.3s`, `4m05s`, `2h10m`.
pub fn human(d: Duration) -> String {
    let ms = d.as_millis();
    match ms {
        0..1_000 => format!("{ms}ms"),
        1_000..60_000 => format!("{:.1}s", d.as_secs_f64()),
        60_000..3_600_000 => format!("{}m{:02}s", ms / 60_000, (ms / 1000) % 60),
        _ => format!("{}h{:02}m", ms / 3_600_000, (ms / 60_000) % 60),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses() {
        assert_eq!(parse("0"), Ok(Duration::ZERO));
        assert_eq!(parse("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse("1.5s"), Ok(Duration::from_millis(1500)));
        for bad in ["", "5", "5x", "s", "ms", "-1s", "1..2s", "forever", "1e400s", "99999999999h"] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn negative_and_zero_say_so() {
        assert!(parse("-5s").unwrap_err().contains("negative"));
        assert!(parse_positive("0").unwrap_err().contains("zero"));
        assert_eq!(parse_positive("1ms"), Ok(Duration::from_millis(1)));
    }

    #[test]
    fn humans() {
        assert_eq!(human(Duration::from_millis(850)), "850ms");
        assert_eq!(human(Duration::from_millis(12_340)), "12.3s");
        assert_eq!(human(Duration::from_secs(245)), "4m05s");
        assert_eq!(human(Duration::from_secs(7800)), "2h10m");
    }
}
