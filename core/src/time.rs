//! Timestamps as ISO 8601 text in UTC, the way JavaScript's
//! `Date.toISOString()` writes them (the markdown files come from JavaScript).

/// Microseconds between 1970-01-01 and 2000-01-01, PostgreSQL's epoch.
pub const POSTGRES_EPOCH_UNIX_MICROS: i64 = 946_684_800_000_000;

/// `2026-11-22T19:07:24.123Z` (`fraction_digits` 3) or
/// `2026-11-22T19:07:24.123456Z` (6) for microseconds since the Unix epoch.
/// The fraction is cut, not rounded, as `to_char(…, 'MS')` does.
pub fn iso_utc(unix_micros: i64, fraction_digits: u32) -> String {
    let seconds = unix_micros.div_euclid(1_000_000);
    let micros = unix_micros.rem_euclid(1_000_000);
    let days = seconds.div_euclid(86_400);
    let second_of_day = seconds.rem_euclid(86_400);
    let (year, month, day) = civil_from_days(days);
    let (h, m, s) = (second_of_day / 3600, second_of_day / 60 % 60, second_of_day % 60);
    let fraction = match fraction_digits {
        6 => format!(".{micros:06}"),
        _ => format!(".{:03}", micros / 1000),
    };
    format!("{year:04}-{month:02}-{day:02}T{h:02}:{m:02}:{s:02}{fraction}Z")
}

/// [`iso_utc`] appended to `out`, without an intermediate string.
pub fn push_iso_utc(out: &mut String, unix_micros: i64, fraction_digits: u32) {
    let seconds = unix_micros.div_euclid(1_000_000);
    let micros = unix_micros.rem_euclid(1_000_000);
    let days = seconds.div_euclid(86_400);
    let second_of_day = seconds.rem_euclid(86_400);
    let (year, month, day) = civil_from_days(days);
    if !(0..=9999).contains(&year) {
        out.push_str(&iso_utc(unix_micros, fraction_digits));
        return;
    }
    digits_into(out, year, 4);
    out.push('-');
    digits_into(out, i64::from(month), 2);
    out.push('-');
    digits_into(out, i64::from(day), 2);
    out.push('T');
    digits_into(out, second_of_day / 3600, 2);
    out.push(':');
    digits_into(out, second_of_day / 60 % 60, 2);
    out.push(':');
    digits_into(out, second_of_day % 60, 2);
    out.push('.');
    match fraction_digits {
        6 => digits_into(out, micros, 6),
        _ => digits_into(out, micros / 1000, 3),
    }
    out.push('Z');
}

/// `value` (0 or more) as `width` zero-padded decimal digits, width <= 6.
fn digits_into(out: &mut String, value: i64, width: usize) {
    let mut buf = [b'0'; 6];
    let mut v = value;
    for slot in buf[..width].iter_mut().rev() {
        *slot = b'0' + (v % 10) as u8;
        v /= 10;
    }
    // Only ASCII digits were written.
    out.push_str(std::str::from_utf8(&buf[..width]).unwrap_or_default());
}

/// Year, month, day of a count of days since 1970-01-01 (proleptic
/// Gregorian; H. Hinnant's `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// The earliest instant a stored time may be, 0001-01-01T00:00:00Z, in
/// microseconds since the Unix epoch: before it, ISO 8601 text has no
/// four-digit year.
pub const EARLIEST_UNIX_MICROS: i64 = -62_135_596_800_000_000;

/// The latest instant a stored time may be, 9999-12-31T23:59:59.999999Z, in
/// microseconds since the Unix epoch.
pub const LATEST_UNIX_MICROS: i64 = 253_402_300_799_999_999;

/// Whether an instant has a four-digit year in UTC, so that its ISO 8601
/// text (see [`iso_utc`]) reads back as the same instant.
pub fn in_iso_range(unix_micros: i64) -> bool {
    (EARLIEST_UNIX_MICROS..=LATEST_UNIX_MICROS).contains(&unix_micros)
}

/// Whether `year` is a leap year of the proleptic Gregorian calendar.
pub fn is_leap_year(year: i64) -> bool {
    year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
}

/// How many days month `month` (1 to 12) of `year` has; 0 for no month.
pub fn days_in_month(year: i64, month: u32) -> u32 {
    match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if is_leap_year(year) => 29,
        2 => 28,
        _ => 0,
    }
}

/// Days since 1970-01-01 of a date (proleptic Gregorian; H. Hinnant's
/// `days_from_civil`, the inverse of `civil_from_days`).
pub fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let m = i64::from(month);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_instants() {
        assert_eq!(iso_utc(0, 3), "1970-01-01T00:00:00.000Z");
        assert_eq!(iso_utc(POSTGRES_EPOCH_UNIX_MICROS, 6), "2000-01-01T00:00:00.000000Z");
        // 2026-11-22T19:07:24.123456Z
        let t = 1_795_374_444_123_456;
        assert_eq!(iso_utc(t, 3), "2026-11-22T19:07:24.123Z");
        assert_eq!(iso_utc(t, 6), "2026-11-22T19:07:24.123456Z");
        // Leap day, and an instant before 1970.
        assert_eq!(iso_utc(951_782_400_000_000, 3), "2000-02-29T00:00:00.000Z");
        assert_eq!(iso_utc(-1, 6), "1969-12-31T23:59:59.999999Z");
    }

    #[test]
    fn pushed_text_is_the_same_text() {
        for t in [0, 1_795_374_444_123_456, 951_782_400_000_000, -1, 253_402_300_799_999_999] {
            for digits in [3, 6] {
                let mut out = String::from("x");
                push_iso_utc(&mut out, t, digits);
                assert_eq!(out, format!("x{}", iso_utc(t, digits)));
            }
        }
    }

    #[test]
    fn every_day_of_four_centuries_is_consecutive() {
        let mut previous = civil_from_days(-1);
        for days in 0..146_097 * 4 {
            let (y, m, d) = civil_from_days(days);
            let (py, pm, pd) = previous;
            let next_day = y == py && m == pm && d == pd + 1;
            let next_month = y == py && m == pm + 1 && d == 1;
            let next_year = y == py + 1 && m == 1 && d == 1 && pm == 12 && pd == 31;
            assert!(next_day || next_month || next_year, "{previous:?} -> {:?}", (y, m, d));
            previous = (y, m, d);
        }
    }

    #[test]
    fn days_from_civil_inverts_civil_from_days() {
        for days in (-719_162..=2_932_896).step_by(7) {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days, "{y}-{m}-{d}");
        }
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(days_from_civil(1, 1, 1) * 86_400_000_000, EARLIEST_UNIX_MICROS);
        assert_eq!((days_from_civil(10000, 1, 1) * 86_400_000_000) - 1, LATEST_UNIX_MICROS);
        assert_eq!(iso_utc(EARLIEST_UNIX_MICROS, 6), "0001-01-01T00:00:00.000000Z");
        assert_eq!(iso_utc(LATEST_UNIX_MICROS, 6), "9999-12-31T23:59:59.999999Z");
        assert!(in_iso_range(0) && !in_iso_range(LATEST_UNIX_MICROS + 1));
        assert!(!in_iso_range(EARLIEST_UNIX_MICROS - 1));
    }

    #[test]
    fn month_lengths() {
        assert_eq!(days_in_month(2024, 2), 29);
        assert_eq!(days_in_month(2025, 2), 28);
        assert_eq!(days_in_month(1900, 2), 28);
        assert_eq!(days_in_month(2000, 2), 29);
        assert_eq!(days_in_month(2025, 4), 30);
        assert_eq!(days_in_month(2025, 12), 31);
        assert_eq!(days_in_month(2025, 13), 0);
        assert_eq!(days_in_month(2025, 0), 0);
    }
}
