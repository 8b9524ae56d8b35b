//! The driver's side of the driver protocol (`docs/client-check.md`), for
//! the drivers written in Rust in this repository.

use std::{io::Write, time::Duration};

use serde_json::{Value, json};

/// Writes the answer to request `id` as one line on stdout.
pub fn answer(id: &Value, result: Result<Value, String>) {
    let line = match result {
        Ok(result) => json!({ "id": id, "ok": true, "result": result }),
        Err(error) => json!({ "id": id, "ok": false, "error": error }),
    };
    let mut stdout = std::io::stdout().lock();
    let _ = writeln!(stdout, "{line}");
    let _ = stdout.flush();
}

/// A `*_ms` field of a request, or `default` milliseconds.
pub fn millis(value: &Value, default: u64) -> Duration {
    Duration::from_millis(value.as_u64().unwrap_or(default))
}
