//! Timestamps as Kubernetes writes them: RFC 3339 in UTC, to and from Unix
//! seconds. Pure arithmetic (civil from days and back), no clock.

/// `2026-11-30T09:00:00Z` from Unix seconds (civil-from-days, UTC).
pub fn rfc3339(secs: i64) -> String {
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = if m <= 2 { y + 1 } else { y };
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z", rem / 3600, (rem % 3600) / 60, rem % 60)
}

/// `2026-11-30T09:00:00Z` → Unix seconds (UTC, whole seconds only).
pub fn parse_rfc3339(s: &str) -> Option<i64> {
    let s = s.trim();
    let (date, time) = s.split_once('T')?;
    let mut d = date.split('-');
    let (y, mo, da): (i64, i64, i64) = (d.next()?.parse().ok()?, d.next()?.parse().ok()?, d.next()?.parse().ok()?);
    let time = time.trim_end_matches('Z');
    let time = time.split(['+', '.']).next()?;
    let mut t = time.split(':');
    let (h, mi, se): (i64, i64, i64) = (t.next()?.parse().ok()?, t.next()?.parse().ok()?, t.next()?.parse().ok()?);
    Some(days_from_civil(y, mo, da) * 86_400 + h * 3600 + mi * 60 + se)
}

/// Days since 1970-01-01 for a proleptic Gregorian date (Howard Hinnant's algorithm).
pub fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Seconds from `then` to `now`; 0 when `then` lies ahead (a node's clock
/// ahead of kgpu's): a pod created "in the future" is new, not -4 years old.
pub fn since(now: i64, then: i64) -> i64 {
    now.saturating_sub(then).max(0)
}

/// A duration for people: `45s`, `12m`, `3h20m`, `2d4h`.
pub fn age(seconds: i64) -> String {
    let s = seconds.max(0);
    if s < 60 {
        format!("{s}s")
    } else if s < 3600 {
        format!("{}m", s / 60)
    } else if s < 86_400 {
        let m = (s % 3600) / 60;
        if m == 0 { format!("{}h", s / 3600) } else { format!("{}h{m}m", s / 3600) }
    } else {
        let h = (s % 86_400) / 3600;
        if h == 0 { format!("{}d", s / 86_400) } else { format!("{}d{h}h", s / 86_400) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_rfc3339_and_round_trip() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(1_796_029_200), "2026-11-30T09:00:00Z");
        assert_eq!(rfc3339(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(parse_rfc3339("2026-11-30T09:00:00Z"), Some(1_796_029_200));
        assert_eq!(parse_rfc3339(&rfc3339(951_782_400)), Some(951_782_400));
        assert_eq!(parse_rfc3339("2026-11-30T09:00:00.123456Z"), Some(1_796_029_200));
    }

    #[test]
    fn ages() {
        assert_eq!(age(45), "45s");
        assert_eq!(age(720), "12m");
        assert_eq!(age(12_000), "3h20m");
        assert_eq!(age(7200), "2h");
        assert_eq!(age(187_200), "2d4h");
        assert_eq!(age(-5), "0s");
    }
}
