//! `cargo bench -p mcp-stdio-client`: lifecycle figures of the client against
//! the real fixtures. Prints numbers; asserts nothing (speed and memory
//! targets live here, not in timed tests). See docs/benchmarks.md.

use std::time::{Duration, Instant};

use mcp_fixtures::locate;
use mcp_stdio_client::{
    Session, SessionOptions, StdioClient,
    config::{Config, ServerConfig, StdioConfig},
};

fn server(name: &str, fixture: &str, args: &[&str]) -> ServerConfig {
    let dir = locate::fixtures_dir().expect("fixture binaries");
    let mut stdio = StdioConfig::new(dir.join(fixture).to_string_lossy());
    stdio.args = args.iter().map(|a| (*a).to_owned()).collect();
    let mut server = ServerConfig::stdio(name, stdio);
    server.timeout = Duration::from_secs(30);
    server
}

fn percentiles(mut samples: Vec<Duration>) -> String {
    samples.sort();
    let at = |q: f64| samples[((samples.len() - 1) as f64 * q).round() as usize];
    format!(
        "p50 {:>7.2} ms  p95 {:>7.2} ms  max {:>7.2} ms  (n={})",
        at(0.5).as_secs_f64() * 1e3,
        at(0.95).as_secs_f64() * 1e3,
        at(1.0).as_secs_f64() * 1e3,
        samples.len()
    )
}

/// Peak resident set of this process, from /proc (Linux).
fn peak_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn main() {
    // `cargo bench` passes `--bench`; nothing else to parse.
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let good = server("good", "fixture-well-behaved", &[]);
        let (mut connect, mut close) = (Vec::new(), Vec::new());
        for _ in 0..40 {
            let start = Instant::now();
            let client = StdioClient::connect(&good).await.unwrap();
            connect.push(start.elapsed());
            let outcome = client.close().await;
            close.push(outcome.elapsed);
        }
        println!("connect (spawn + handshake), well-behaved   {}", percentiles(connect));
        println!("close by EOF, well-behaved                  {}", percentiles(close));

        let client = StdioClient::connect(&good).await.unwrap();
        let mut calls = Vec::new();
        for n in 0..500 {
            let args = serde_json::json!({ "a": n, "b": 1 });
            let start = Instant::now();
            client.call_tool("add", args.as_object().cloned()).await.unwrap();
            calls.push(start.elapsed());
        }
        client.close().await;
        println!("tools/call round trip                       {}", percentiles(calls));

        let mut config = Config::default();
        for n in 0..16 {
            let entry = server(&format!("s{n}"), "fixture-well-behaved", &["--handshake-delay-ms", "200"]);
            config.servers.insert(entry.name.clone(), entry);
        }
        let start = Instant::now();
        let session = Session::build(&config, &SessionOptions::default()).await;
        let built = start.elapsed();
        let start = Instant::now();
        session.close().await;
        println!(
            "session of 16 servers, 200 ms handshakes    build {:.0} ms (sum would be 3200 ms), close {:.0} ms",
            built.as_secs_f64() * 1e3,
            start.elapsed().as_secs_f64() * 1e3
        );

        let before = peak_rss_kib();
        const FLOOD: u64 = 256 * 1024 * 1024;
        let flood = server("flood", "fixture-stderr-flooding", &["--bytes", &FLOOD.to_string(), "--per-call-bytes", "0"]);
        let start = Instant::now();
        let client = StdioClient::connect(&flood).await.unwrap();
        let drained = start.elapsed();
        client.close().await;
        let after = peak_rss_kib();
        println!(
            "stderr drained while serving (256 MiB)      {:.0} MiB/s, {} lines; peak RSS {} -> {} KiB",
            FLOOD as f64 / (1024.0 * 1024.0) / drained.as_secs_f64(),
            client.stderr_lines(),
            before.unwrap_or(0),
            after.unwrap_or(0)
        );
    });
}
