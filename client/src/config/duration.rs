//! Durations as written in the config (`300ms`, `2s`, `5m`, `1h`): parsing and printing.

use std::time::Duration;

/// Why a duration did not parse. Messages do not repeat the input: the caller names the field,
/// and a config error must not echo a value from the document.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    /// The text is empty.
    #[error("duration is empty")]
    Empty,
    /// A number without a unit.
    #[error("a duration needs a unit: write e.g. 30s (units: ms, s, m, h)")]
    MissingUnit,
    /// A unit other than ms, s, m, h.
    #[error("unknown duration unit (units: ms, s, m, h)")]
    UnknownUnit,
    /// Not a whole number before the unit.
    #[error("a duration is a whole number followed by a unit, e.g. 300ms, 2s, 5m, 1h")]
    NotANumber,
    /// Zero, where a positive duration is needed.
    #[error("duration must be greater than zero")]
    Zero,
    /// More than a `Duration` holds.
    #[error("duration is too large")]
    Overflow,
}

/// Parses `<whole number><unit>` with unit `ms`, `s`, `m` or `h`, e.g. `300ms`, `2s`, `5m`, `1h`.
///
/// Surrounding whitespace is ignored. A unit is required: a bare `30` is ambiguous between
/// seconds and milliseconds, and guessing wrong turns a 30 ms grace into a 30 s hang. Zero is
/// rejected because every duration in the config bounds a wait, and a zero bound makes every
/// wait fail at once.
pub fn parse_duration(text: &str) -> Result<Duration, DurationError> {
    let text = text.trim();
    if text.is_empty() {
        return Err(DurationError::Empty);
    }
    let digits_end = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(digits_end);
    if number.is_empty() {
        return Err(DurationError::NotANumber);
    }
    let millis_per_unit: u64 = match unit {
        "" => return Err(DurationError::MissingUnit),
        "ms" => 1,
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        _ if unit.starts_with(['.', ',']) => return Err(DurationError::NotANumber),
        _ => return Err(DurationError::UnknownUnit),
    };
    let number: u64 = number.parse().map_err(|_| DurationError::Overflow)?;
    let millis = number
        .checked_mul(millis_per_unit)
        .ok_or(DurationError::Overflow)?;
    if millis == 0 {
        return Err(DurationError::Zero);
    }
    Ok(Duration::from_millis(millis))
}

/// Prints a duration in the largest unit that represents it exactly, so that the output parses
/// back with [`parse_duration`] (`2s`, `300ms`, `5m`, `1h`). A duration with a sub-millisecond
/// part, which the config cannot express, falls back to `Duration`'s own `Debug` form.
pub fn format_duration(duration: Duration) -> String {
    if !duration.subsec_nanos().is_multiple_of(1_000_000) {
        return format!("{duration:?}");
    }
    let millis = duration.as_millis();
    if millis == 0 {
        return "0s".to_owned();
    }
    for (unit, size) in [("h", 3_600_000), ("m", 60_000), ("s", 1_000)] {
        if millis.is_multiple_of(size) {
            return format!("{}{unit}", millis / size);
        }
    }
    format!("{millis}ms")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_unit() {
        assert_eq!(parse_duration("300ms"), Ok(Duration::from_millis(300)));
        assert_eq!(parse_duration("2s"), Ok(Duration::from_secs(2)));
        assert_eq!(parse_duration("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_duration(" 30s\n"), Ok(Duration::from_secs(30)));
    }

    #[test]
    fn rejects_zero_in_every_unit() {
        for text in ["0ms", "0s", "0m", "0h", "000s"] {
            assert_eq!(parse_duration(text), Err(DurationError::Zero), "{text}");
        }
    }

    #[test]
    fn rejects_malformed_input() {
        assert_eq!(parse_duration(""), Err(DurationError::Empty));
        assert_eq!(parse_duration("  "), Err(DurationError::Empty));
        assert_eq!(parse_duration("30"), Err(DurationError::MissingUnit));
        assert_eq!(parse_duration("30sec"), Err(DurationError::UnknownUnit));
        assert_eq!(parse_duration("30 s"), Err(DurationError::UnknownUnit));
        assert_eq!(parse_duration("1d"), Err(DurationError::UnknownUnit));
        assert_eq!(parse_duration("s"), Err(DurationError::NotANumber));
        assert_eq!(parse_duration("-1s"), Err(DurationError::NotANumber));
        assert_eq!(parse_duration("+1s"), Err(DurationError::NotANumber));
        assert_eq!(parse_duration("1.5s"), Err(DurationError::NotANumber));
        assert_eq!(parse_duration("1m30s"), Err(DurationError::UnknownUnit));
        assert_eq!(
            parse_duration("99999999999999999999s"),
            Err(DurationError::Overflow)
        );
        assert_eq!(
            parse_duration("18446744073709551615h"),
            Err(DurationError::Overflow)
        );
    }

    #[test]
    fn error_messages_do_not_repeat_the_input() {
        for text in ["sk-live-1234", "12sk-live", "99999999999999999999s"] {
            let err = parse_duration(text).unwrap_err();
            assert!(!err.to_string().contains("sk-live"), "{err}");
            assert!(!format!("{err:?}").contains("sk-live"), "{err:?}");
        }
    }

    #[test]
    fn formats_in_the_largest_exact_unit_and_round_trips() {
        for (duration, text) in [
            (Duration::from_millis(300), "300ms"),
            (Duration::from_millis(1500), "1500ms"),
            (Duration::from_secs(2), "2s"),
            (Duration::from_secs(90), "90s"),
            (Duration::from_secs(300), "5m"),
            (Duration::from_secs(7200), "2h"),
        ] {
            assert_eq!(format_duration(duration), text);
            assert_eq!(parse_duration(text), Ok(duration));
        }
        assert_eq!(format_duration(Duration::from_micros(1500)), "1.5ms");
    }
}
