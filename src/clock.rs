//! Wall-clock formatting: RFC 3339 UTC timestamps (`2026-11-29T16:37:09Z`) for snapshot
//! listings and the manifest's `exported_at`, without a date-time dependency.

/// Formats nanoseconds since the epoch as RFC 3339 UTC with second precision.
pub fn rfc3339_utc(unix_ns: i128) -> String {
    let secs = i64::try_from(unix_ns.div_euclid(1_000_000_000)).unwrap_or(0);
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60
    )
}

/// Formats a time as RFC 3339 UTC with microseconds (`2026-11-29T16:37:09.123456+00:00`),
/// the manifest's `exported_at` form; times before 1970 clamp to the epoch.
pub fn rfc3339_utc_micros(at: std::time::SystemTime) -> String {
    let since = at.duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    let secs = i64::try_from(since.as_secs()).unwrap_or(i64::MAX / 2);
    let (y, m, d) = civil_from_days(secs.div_euclid(86_400));
    let rem = secs.rem_euclid(86_400);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:06}+00:00",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60,
        since.subsec_micros()
    )
}

/// Now, as nanoseconds since the epoch (the unit of snapshot times, stat-cache times and
/// the racy rule).
pub fn now_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// Howard Hinnant's days-to-civil algorithm (proleptic Gregorian).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_instants() {
        assert_eq!(rfc3339_utc(0), "1970-01-01T00:00:00Z");
        assert_eq!(
            rfc3339_utc(1_709_210_096_000_000_000),
            "2024-02-29T12:34:56Z"
        );
        assert_eq!(rfc3339_utc(-1_000_000_000), "1969-12-31T23:59:59Z");
    }
}
