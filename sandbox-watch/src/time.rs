//! Times as the evidence log writes them, and read back, through jiff.
//!
//! Every record's `at` is RFC 3339 in UTC with nine fractional digits,
//! `2026-11-30T11:04:09.123456789Z`. It is hashed with the record, so the form never changes:
//! the tests below pin it byte for byte.
use std::time::SystemTime;

use jiff::Timestamp;
use jiff::fmt::temporal::Pieces;

/// `t` as `2026-11-30T11:04:09.123456789Z` (UTC, always nine fractional digits).
pub fn rfc3339_nanos(t: SystemTime) -> String {
    // jiff's range is the years -9999 to 9999; a clock outside it is clamped to its end.
    let ts = Timestamp::try_from(t).unwrap_or(if t > SystemTime::UNIX_EPOCH {
        Timestamp::MAX
    } else {
        Timestamp::MIN
    });
    format!("{ts:.9}")
}

/// An RFC 3339 date-time read back: the instant, and the offset from UTC it was written with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Parsed {
    /// Nanoseconds since 1970-01-01T00:00:00Z.
    pub unix_ns: i128,
    /// The offset from UTC in seconds (0 for `Z`).
    pub offset_s: i32,
}

impl Parsed {
    pub fn unix_ms(self) -> i64 {
        self.unix_ns.div_euclid(1_000_000) as i64
    }
}

/// Parses an RFC 3339 date-time with an offset (`…Z`, `…+02:00`); None for anything else,
/// a date-time without an offset included.
pub fn parse(s: &str) -> Option<Parsed> {
    let unix_ns = s.parse::<Timestamp>().ok()?.as_nanosecond();
    let offset_s = Pieces::parse(s).ok()?.to_numeric_offset()?.seconds();
    Some(Parsed { unix_ns, offset_s })
}

/// The nanoseconds since the epoch of an RFC 3339 date-time; None for anything else.
pub fn parse_ns(s: &str) -> Option<i128> {
    parse(s).map(|p| p.unix_ns)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    fn at(secs: u64, nanos: u32) -> SystemTime {
        UNIX_EPOCH + Duration::new(secs, nanos)
    }

    #[test]
    fn rfc3339_nanos_of_known_instants() {
        assert_eq!(rfc3339_nanos(UNIX_EPOCH), "1970-01-01T00:00:00.000000000Z");
        // 2026-11-30T11:04:09Z = 1796036649
        assert_eq!(
            rfc3339_nanos(at(1_796_036_649, 1)),
            "2026-11-30T11:04:09.000000001Z"
        );
        assert_eq!(
            rfc3339_nanos(at(1_796_036_649, 123_456_789)),
            "2026-11-30T11:04:09.123456789Z"
        );
        // 2024-02-29T00:00:00Z = 1709164800, and the day after.
        assert_eq!(
            rfc3339_nanos(at(1_709_164_800, 0)),
            "2024-02-29T00:00:00.000000000Z"
        );
        assert_eq!(
            rfc3339_nanos(at(1_709_251_199, 999_999_999)),
            "2024-02-29T23:59:59.999999999Z"
        );
        assert_eq!(
            rfc3339_nanos(at(1_709_251_200, 0)),
            "2024-03-01T00:00:00.000000000Z"
        );
        // 2000 is a leap year, 2100 is not.
        assert_eq!(
            rfc3339_nanos(at(951_782_400, 0)),
            "2000-02-29T00:00:00.000000000Z"
        );
        assert_eq!(
            rfc3339_nanos(at(4_107_542_400, 0)),
            "2100-03-01T00:00:00.000000000Z"
        );
        // Before 1970.
        assert_eq!(
            rfc3339_nanos(UNIX_EPOCH - Duration::new(1, 500_000_000)),
            "1969-12-31T23:59:58.500000000Z"
        );
    }

    /// The form is what the hand-written formatter before jiff wrote, for every day of 400
    /// years (a whole Gregorian cycle) and the nanosecond extremes: old logs and new ones
    /// carry the same `at` for the same instant.
    #[test]
    fn the_form_is_the_same_as_before_for_a_whole_cycle() {
        fn civil_from_days(days: i64) -> (i64, u32, u32) {
            let z = days + 719_468;
            let era = z.div_euclid(146_097);
            let doe = z.rem_euclid(146_097);
            let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
            let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
            let mp = (5 * doy + 2) / 153;
            let d = doy - (153 * mp + 2) / 5 + 1;
            let m = if mp < 10 { mp + 3 } else { mp - 9 };
            (yoe + era * 400 + i64::from(m <= 2), m as u32, d as u32)
        }
        for days in (0..400 * 366).step_by(7) {
            for (sod, nanos) in [(0, 0), (86_399, 999_999_999), (45_296, 7)] {
                let secs = days * 86_400 + sod;
                let (y, m, d) = civil_from_days(days);
                let old = format!(
                    "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{nanos:09}Z",
                    sod / 3600,
                    sod % 3600 / 60,
                    sod % 60
                );
                assert_eq!(rfc3339_nanos(at(secs as u64, nanos)), old);
                let ns = secs as i128 * 1_000_000_000 + nanos as i128;
                assert_eq!(parse_ns(&old), Some(ns), "{old}");
            }
        }
    }

    #[test]
    fn parses_back() {
        for t in [
            UNIX_EPOCH,
            at(1_796_036_649, 1),
            at(1_709_164_800, 999_999_999),
        ] {
            let text = rfc3339_nanos(t);
            let ns = t.duration_since(UNIX_EPOCH).unwrap().as_nanos() as i128;
            assert_eq!(parse_ns(&text), Some(ns), "{text}");
        }
        assert_eq!(
            parse_ns("2026-11-30T11:04:09Z"),
            Some(1_796_036_649_000_000_000)
        );
        assert_eq!(
            parse_ns("2026-11-30T11:04:09.5Z"),
            Some(1_796_036_649_500_000_000)
        );
        assert_eq!(parse_ns("1970-01-01T00:00:01.5Z"), Some(1_500_000_000));
        assert_eq!(
            parse_ns("2026-11-30T11:20:51.285371778Z"),
            Some(1_796_037_651_285_371_778)
        );
        assert_eq!(parse_ns("1969-12-31T23:59:59Z"), Some(-1_000_000_000));
    }

    #[test]
    fn offsets() {
        const AT_MS: i64 = 1_796_037_651_291;
        let p = |s| parse(s).map(|p| (p.unix_ms(), p.offset_s / 60));
        assert_eq!(p("1970-01-01T00:00:00Z"), Some((0, 0)));
        assert_eq!(p("2026-11-30T11:20:51.291Z"), Some((AT_MS, 0)));
        assert_eq!(p("2026-11-30T11:20:51.2Z"), Some((AT_MS - 91, 0)));
        assert_eq!(p("2026-11-30T12:20:51.291+01:00"), Some((AT_MS, 60)));
        assert_eq!(p("2026-11-30t06:50:51.291-04:30"), Some((AT_MS, -270)));
        assert_eq!(p("2000-02-29T00:00:00Z"), Some((951_782_400_000, 0)));
        assert_eq!(p("1969-12-31T23:59:59Z"), Some((-1000, 0)));
        assert_eq!(p("1969-12-31T23:59:59.9995Z"), Some((-1, 0)));
    }

    #[test]
    fn not_a_date_time() {
        for bad in [
            "",
            "yesterday",
            "2026-11-30",
            "2026-11-30T11:20:51",
            "2026-13-01T00:00:00Z",
            "2026-13-30T11:04:09Z",
            "2026-11-30T11:20:51.Z",
            "2026-11-30T11:20:51Zjunk",
            "2026-11-30T25:00:00Z",
            "x026-11-30T11:04:09Z",
            "２026-11-30T11:20:51Z",
            "2026-11-30T11:20:51.1é",
        ] {
            assert_eq!(parse(bad), None, "{bad}");
        }
    }
}
