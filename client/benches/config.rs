//! `cargo bench -p mcp-stdio-client --bench config`: how long loading a config takes, for a
//! realistic file and for the pathological ones the size and nesting bounds reject. Prints
//! numbers; asserts nothing (the functional tests check that the bounds reject, this shows that
//! they reject fast). See docs/benchmarks.md.

use std::time::{Duration, Instant};

use mcp_stdio_client::config::{Config, MAX_BYTES, MAX_DEPTH};

fn percentiles(mut samples: Vec<Duration>) -> String {
    samples.sort();
    let at = |q: f64| samples[((samples.len() - 1) as f64 * q).round() as usize];
    format!(
        "p50 {:>8.3} ms  max {:>8.3} ms  (n={})",
        at(0.5).as_secs_f64() * 1e3,
        at(1.0).as_secs_f64() * 1e3,
        samples.len()
    )
}

fn measure(label: &str, text: &str, runs: usize) {
    let env = |_: &str| Some("x".to_owned());
    let mut outcome = String::new();
    let samples = (0..runs)
        .map(|_| {
            let started = Instant::now();
            let result = Config::from_str_with_env(text, "bench.yaml", &env);
            let elapsed = started.elapsed();
            outcome = match result {
                Ok(config) => format!("loaded {} servers", config.servers.len()),
                Err(error) => format!(
                    "rejected: {}",
                    error.to_string().chars().take(60).collect::<String>()
                ),
            };
            elapsed
        })
        .collect();
    println!("{label:<44} {}  {outcome}", percentiles(samples));
}

fn main() {
    let mut realistic = String::from("MCP_SERVERS:\n");
    for i in 0..50 {
        realistic.push_str(&format!(
            "  server-{i}:\n    COMMAND: npx\n    ARGS: [\"-y\", \"pkg-{i}\", \"${{HOME}}/x\"]\n    ENV: {{TOKEN: \"${{T}}\", A: b}}\n    TIMEOUT: 30s\n"
        ));
    }
    measure("50 servers (realistic)", &realistic, 50);

    let nested = |bytes: usize| format!("other: {}\nMCP_SERVERS: {{}}\n", "[".repeat(bytes));
    measure("100 KB of nested [ (was 8 s)", &nested(100 * 1024), 50);
    measure("MAX_BYTES of nested [", &nested(MAX_BYTES - 40), 50);
    measure(
        "over MAX_BYTES",
        &format!("MCP_SERVERS: {{}}\n#{}\n", "x".repeat(MAX_BYTES)),
        50,
    );

    // The worst a document within the bounds can do: nested to the depth bound, then as many
    // tokens as fit in the innermost list, then a syntax error at the very end.
    for depth in [1, MAX_DEPTH - 2] {
        for size in [MAX_BYTES / 4, MAX_BYTES] {
            let mut deep = format!("other: {}", "[".repeat(depth));
            while deep.len() < size - 100 {
                deep.push_str("a, ");
            }
            deep.push_str("\nMCP_SERVERS: {}\n");
            let label = format!(
                "{} KiB of tokens at depth {depth}, syntax error",
                size / 1024
            );
            measure(&label, &deep, 5);
        }
    }
}
