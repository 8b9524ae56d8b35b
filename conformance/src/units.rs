//! How a duration is written for people, one way for every mode.

use std::time::Duration;

/// `12 ms` below a second, `1.20 s` above.
pub fn human(d: Duration) -> String {
    if d < Duration::from_secs(1) {
        format!("{} ms", d.as_millis())
    } else {
        format!("{:.2} s", d.as_secs_f64())
    }
}
