//! The runway of the time field (issue 33, item 3) on real `uidgen serve` processes: status,
//! metrics and the log's warning under a layout that runs out within two years and under the
//! default one, and `uidgen layout check` as a process, its high mark given or read from a
//! store a leased server wrote.
#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

use std::time::Duration;

use crate::common;

use common::{Server, fetch, run, sqlite_url};

const TWO_YEARS_MS: u64 = 730 * 86_400_000;

fn now_ms() -> u64 {
    u64::try_from(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis(),
    )
    .unwrap()
}

/// The value of the Prometheus line that starts with `series`.
fn sample(metrics: &str, series: &str) -> f64 {
    metrics
        .lines()
        .find_map(|line| line.strip_prefix(series))
        .unwrap_or_else(|| panic!("no {series} in {metrics}"))
        .trim()
        .parse()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_layout_that_runs_out_within_two_years_is_warned_of_in_the_log_status_and_metrics() {
    // 26 bits of seconds (776 days) from an epoch 400 days ago: about 376 days left.
    let epoch = (now_ms() - 400 * 86_400_000).to_string();
    let server = Server::start(
        &[],
        &[
            ("UIDGEN_LAYOUT_TIME_BITS", "26"),
            ("UIDGEN_LAYOUT_WORKER_BITS", "24"),
            ("UIDGEN_LAYOUT_SEQ_BITS", "13"),
            ("UIDGEN_LAYOUT_EPOCH", &epoch),
        ],
    );
    assert!(
        server.wait_for_log("days left at today's rate", Duration::from_secs(10)),
        "{}",
        server.log()
    );
    let log = server.log();
    let warning = log.lines().find(|l| l.contains("runs out at")).unwrap();
    assert!(warning.contains("WARN"), "{warning}");
    assert!(warning.contains("uidgen layout check"), "{warning}");
    let client = reqwest::Client::new();
    let (code, body) = fetch(&client, &server.url("/v1/status")).await;
    assert_eq!(code, 200, "{body}");
    let status: serde_json::Value = serde_json::from_str(&body).unwrap();
    let runway = &status["runway"];
    let (clock, lead) = (
        runway["left_at_clock_ms"].as_u64().unwrap(),
        runway["left_at_lead_ms"].as_u64().unwrap(),
    );
    assert_eq!(runway["warning"], true, "{runway}");
    assert!(lead <= clock && clock < TWO_YEARS_MS, "{runway}");
    let days = clock / 86_400_000;
    assert!((370..=377).contains(&days), "{runway}");
    assert_eq!(runway["warn_below_ms"].as_u64(), Some(TWO_YEARS_MS));
    assert_eq!(status["spaces"][0]["runway"]["warning"], true, "{status}");
    let (_, metrics) = fetch(&client, &server.url("/metrics")).await;
    let seconds = |basis: &str| {
        sample(
            &metrics,
            &format!("uidgen_time_field_runway_seconds{{space=\"default\",basis=\"{basis}\"}} "),
        )
    };
    #[allow(clippy::cast_precision_loss)]
    let two_years = TWO_YEARS_MS as f64 / 1000.0;
    assert!(seconds("lead") <= seconds("clock"), "{metrics}");
    assert!(
        seconds("clock") < two_years && seconds("lead") > 0.0,
        "{metrics}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_layout_shows_its_2034_end_and_warns_of_nothing() {
    let server = Server::start(&[], &[]);
    let client = reqwest::Client::new();
    let (_, body) = fetch(&client, &server.url("/v1/status")).await;
    let status: serde_json::Value = serde_json::from_str(&body).unwrap();
    let runway = &status["runway"];
    assert_eq!(
        runway["runs_out_at"], "2034-07-04T21:24:16.000Z",
        "{runway}"
    );
    assert_eq!(runway["runs_out_at_ms"], 2_035_661_056_000u64);
    assert_eq!(runway["warning"], false, "{runway}");
    let (_, metrics) = fetch(&client, &server.url("/metrics")).await;
    let clock = sample(
        &metrics,
        "uidgen_time_field_runway_seconds{space=\"default\",basis=\"clock\"} ",
    );
    #[allow(clippy::cast_precision_loss)]
    let expected = (2_035_661_056_000 - now_ms()) as f64 / 1000.0;
    assert!((clock - expected).abs() < 60.0, "{clock} vs {expected}");
    assert!(!server.log().contains("runs out at"), "{}", server.log());
}

/// `uidgen layout check …`: (exit code, stdout).
fn check(args: &[&str]) -> (Option<i32>, String) {
    let (status, out, err) = run(&[&["layout", "check"][..], args].concat(), &[]);
    (status.code(), format!("{out}{err}"))
}

#[test]
fn layout_check_proves_baidu_continued_and_refuses_a_fresh_epoch_over_the_legacy_space() {
    let end = "2024-11-20T13:24:16Z";
    let (code, out) = check(&[
        "--from",
        "baidu_legacy",
        "--to",
        "baidu_continued",
        "--issued-until",
        end,
    ]);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("never equal: yes"), "{out}");
    assert!(out.contains("sorts above: yes"), "{out}");
    assert!(out.contains("bit 63"), "{out}");
    let (code, out) = check(&[
        "--from",
        "baidu_legacy",
        "--to",
        "baidu@2026-01-01",
        "--issued-until",
        end,
    ]);
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("never equal: NO, ID "), "{out}");
    assert!(out.contains("not safe"), "{out}");
    // Custom bits as [layout] takes them, under the highest ID such a layout holds: every
    // continued ID has bit 63 set, so above it. A key [layout] does not know is refused by name.
    let (code, out) = check(&[
        "--from",
        "time_bits=30,worker_bits=20,seq_bits=13,epoch=2020-01-01",
        "--to",
        "baidu_continued",
        "--highest-id",
        &i64::MAX.to_string(),
    ]);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("time bits of 1000 ms"), "{out}");
    let (code, out) = check(&[
        "--from",
        "time_bitz=30",
        "--to",
        "baidu",
        "--highest-id",
        "1",
    ]);
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("time_bitz"), "{out}");
    // A high mark is required.
    let (code, out) = check(&["--from", "baidu", "--to", "baidu"]);
    assert_eq!(code, Some(2), "{out}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn layout_check_reads_the_high_mark_a_leased_server_recorded_in_its_store() {
    let store = sqlite_url("runway-leases");
    let server = Server::start(
        &[],
        &[
            ("UIDGEN_STORE", &store),
            ("UIDGEN_WORKER_ASSIGNER", "leased"),
        ],
    );
    let client = reqwest::Client::new();
    let (code, body) = fetch(&client, &server.url("/v1/ids?count=1000")).await;
    assert_eq!(code, 200, "{body}");
    let args = [
        "--from",
        "baidu",
        "--to",
        "baidu",
        "--store",
        store.as_str(),
    ];
    // While the lease is held its server may issue past any mark: undecided.
    let (code, out) = check(&args);
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains("undecided: 1 worker id of space default is still leased"),
        "{out}"
    );
    let (status, log) = server.terminate();
    assert!(status.success(), "{log}");
    let (_, out) = check(&args);
    let mark = out
        .lines()
        .find_map(|l| l.strip_prefix("high mark: every ID was stamped before "))
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("{out}"))
        .to_owned();
    // From the mark on the same layout repeats nothing; from the millisecond before, it may.
    let (code, out) = check(&[&args[..], &["--switch-at", &mark]].concat());
    assert_eq!(code, Some(0), "{out}");
    let mark_ms = uidgen_core::calendar::parse_epoch_ms(&mark).unwrap();
    let before = (mark_ms - 1).to_string();
    let (code, out) = check(&[&args[..], &["--switch-at", &before]].concat());
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("never equal: NO"), "{out}");
}
