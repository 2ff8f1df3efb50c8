//! `events --timestamps`: the time a line arrived, as drbdsetup prints it before the verb
//! (ISO 8601 with microseconds and the UTC offset, e.g. `2026-11-27T15:51:24.123456+00:00`).
//!
//! Invariant: always UTC (`+00:00`): the machine's time zone is not read, so the text does
//! not depend on the environment and needs no time-zone database.

use std::time::{SystemTime, UNIX_EPOCH};

const SECONDS_PER_DAY: u64 = 86_400;

/// `time` as `YYYY-MM-DDTHH:MM:SS.ffffff+00:00`; a time before 1970 prints as the epoch.
pub fn format(time: SystemTime) -> String {
    let since_epoch = time.duration_since(UNIX_EPOCH).unwrap_or_default();
    let seconds = since_epoch.as_secs();
    let (year, month, day) = civil_from_days(seconds / SECONDS_PER_DAY);
    let of_day = seconds % SECONDS_PER_DAY;
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:06}+00:00",
        of_day / 3600,
        of_day % 3600 / 60,
        of_day % 60,
        since_epoch.subsec_micros()
    )
}

/// The proleptic Gregorian date of a day count since 1970-01-01 (Howard Hinnant's
/// `civil_from_days`, for non-negative days): (year, month 1-12, day 1-31).
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let day_of_era = z % 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_index + 2) / 5 + 1;
    let month = if month_index < 10 {
        month_index + 3
    } else {
        month_index - 9
    };
    let year = year_of_era + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[track_caller]
    fn check(seconds: u64, micros: u32, expected: &str) {
        let time = UNIX_EPOCH + Duration::new(seconds, micros * 1000);
        assert_eq!(format(time), expected);
    }

    #[test]
    fn dates_times_and_microseconds() {
        check(0, 0, "1970-01-01T00:00:00.000000+00:00");
        check(951_782_400, 5, "2000-02-29T00:00:00.000005+00:00");
        check(1_709_251_199, 999_999, "2024-02-29T23:59:59.999999+00:00");
        check(1_798_386_684, 123_456, "2026-12-27T15:51:24.123456+00:00");
        check(4_102_444_800, 0, "2100-01-01T00:00:00.000000+00:00");
    }
}
