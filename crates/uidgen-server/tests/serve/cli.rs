//! The real `uidgen` binary as a newcomer meets it: options anywhere on the command line,
//! clap's exit code for a bad option, a mistyped `UIDGEN_…` variable refused, `serve --layout`
//! and `--epoch`, a host name to listen on, and start-up errors that say what is wrong, once.
#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

use crate::common;

use common::{Server, assert_unique, fetch, run, sqlite_url, temp_dir};

#[test]
fn decode_reads_options_after_the_ids() {
    // 1 << 12 in Snowflake's bits is worker 1, sequence 0; in Baidu's, sequence 4096.
    let id = (1u64 << 12).to_string();
    let (status, out, err) = run(&["decode", &id, "--layout", "snowflake"], &[]);
    assert!(status.success(), "{err}");
    assert_eq!(out.lines().count(), 1, "{out}");
    assert!(out.contains("worker=1 sequence=0"), "{out}");
    assert!(out.trim_end().ends_with("layout=snowflake"), "{out}");
    let (status, out, err) = run(
        &["decode", "--json", &id, "--layout", "snowflake", "7"],
        &[],
    );
    assert!(status.success(), "{err}");
    assert_eq!(out.lines().count(), 2, "{out}");
    assert!(out.contains(r#""workerId":"1""#), "{out}");
}

#[test]
fn decode_shows_the_time_in_utc_unless_tz_names_a_zone() {
    // Baidu's legacy epoch is 2016-05-20T00:00:00+08:00, so time unit 3 is 2016-05-19T16:00:03Z.
    let legacy = ["--layout", "baidu_legacy"];
    let make = ["make", "--units", "3", "--worker", "2", "--seq", "1"];
    let (status, id, err) = run(&[&make[..], &legacy].concat(), &[]);
    assert!(status.success(), "{err}");
    let id = id.trim().to_owned();
    // `TZ` is set on purpose: it is not read, so the host's zone cannot change the output.
    let tokyo = [("TZ", "Asia/Tokyo")];
    let (status, out, err) = run(&[&["decode", &id][..], &legacy].concat(), &tokyo);
    assert!(status.success(), "{err}");
    assert!(out.contains(" time=2016-05-19T16:00:03.000Z "), "{out}");
    let (status, out, err) = run(
        &[&["decode", &id, "--tz", "Asia/Shanghai"][..], &legacy].concat(),
        &tokyo,
    );
    assert!(status.success(), "{err}");
    assert!(
        out.contains(" time=2016-05-20T00:00:03.000+08:00[Asia/Shanghai] "),
        "{out}"
    );
    let (status, out, err) = run(
        &[&["decode", "--json", &id, "--tz", "-05:30"][..], &legacy].concat(),
        &tokyo,
    );
    assert!(status.success(), "{err}");
    assert!(
        out.contains(r#""timestamp":"2016-05-19 10:30:03","timeZone":"-05:30""#),
        "{out}"
    );
}

#[test]
fn decode_refuses_an_unknown_zone_naming_it() {
    let (status, out, err) = run(&["decode", "1", "--tz", "Mars/Olympus"], &[]);
    assert!(!status.success(), "ran: {out}");
    assert!(out.is_empty(), "{out}");
    assert!(
        err.contains("--tz") && err.contains("Mars/Olympus"),
        "{err}"
    );
}

#[test]
fn an_unknown_option_is_a_usage_error_and_a_negative_id_a_malformed_one() {
    let (status, _, err) = run(&["decode", "1", "--bogus"], &[]);
    assert_eq!(status.code(), Some(2), "clap's usage error: {err}");
    assert!(err.contains("unexpected argument '--bogus'"), "{err}");
    let (status, _, err) = run(&["decode", "-5"], &[]);
    assert_eq!(status.code(), Some(1), "{err}");
    assert_eq!(
        err.trim(),
        "error: malformed id -5: not a non-negative decimal integer"
    );
}

#[test]
fn a_mistyped_variable_stops_every_command_that_reads_the_configuration() {
    let store = sqlite_url("typo");
    let typo = [("UIDGEN_LAYOUTT", "x"), ("UIDGEN_STORE", store.as_str())];
    for args in [
        &["serve", "--listen", "127.0.0.1:0"][..],
        &["decode", "1"],
        &["make", "--units", "1", "--worker", "1", "--seq", "1"],
        &["gen", "--worker", "1"],
        &["migrate"],
    ] {
        let (status, out, err) = run(args, &typo);
        assert!(!status.success(), "{args:?} ran: {out}");
        assert_eq!(
            err.trim(),
            "error: unknown environment variable UIDGEN_LAYOUTT; did you mean UIDGEN_LAYOUT?",
            "{args:?}"
        );
    }
    // Variables that are not configuration keys, but are read by the worker-node registry, the
    // tests or the scripts, are no typos.
    let known = [
        ("UIDGEN_HOST", "10.0.0.7"),
        ("UIDGEN_PORT", "8080"),
        ("UIDGEN_BIN", "/usr/bin/uidgen"),
        ("UIDGEN_TEST_ANYTHING", "x"),
    ];
    let (status, _, err) = run(&["decode", "1"], &known);
    assert!(status.success(), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_takes_a_layout_and_an_epoch_and_may_listen_on_a_host_name() {
    let store = sqlite_url("serve-layout");
    let server = Server::start_listening(
        "localhost:0",
        &["--layout", "snowflake", "--epoch", "2020-01-01"],
        &[("UIDGEN_STORE", &store), ("UIDGEN_GENERATOR", "snowflake")],
    );
    let client = reqwest::Client::new();
    let (status, body) = fetch(&client, &server.url("/v1/layouts")).await;
    assert_eq!(status, 200, "{body}");
    let served = &common::json(&body)[0];
    assert_eq!(served["name"], "snowflake", "{body}");
    assert_eq!(served["served"], true, "{body}");
    assert_eq!(served["epoch"], "2020-01-01T00:00:00.000Z", "{body}");
    let (_, id) = fetch(&client, &server.url("/genid")).await;
    let (status, out, err) = run(
        &[
            "decode",
            id.trim(),
            "--layout",
            "snowflake",
            "--epoch",
            "2020-01-01",
        ],
        &[],
    );
    assert!(status.success(), "{err}");
    assert!(
        out.contains(&format!("worker={}", server.worker_id())),
        "{out}"
    );
    // The epoch moves every ID of the space: an override that does not fit is refused at once.
    let (status, _, err) = run(
        &["serve", "--listen", "127.0.0.1:0", "--layout", "snowflake"],
        &[
            ("UIDGEN_STORE", &store),
            ("UIDGEN_WORKER_ASSIGNER", "static"),
            ("UIDGEN_WORKER_ID", "5000"),
        ],
    );
    assert!(!status.success());
    assert!(
        err.contains(
            "invalid config key `worker.id`: worker id 5000 exceeds the layout's maximum 1023"
        ),
        "{err}"
    );
}

#[test]
fn a_missing_sqlite_folder_is_refused_and_not_created() {
    let parent = temp_dir("missing-folder").join("not-there");
    let url = format!("sqlite://{}/dir/x.db", parent.display());
    let (status, _, err) = run(&["migrate", "--store", &url], &[]);
    assert!(!status.success());
    assert!(
        err.contains(&format!(
            "the folder {}/dir does not exist",
            parent.display()
        )),
        "{err}"
    );
    assert!(!parent.exists(), "created {}", parent.display());
}

#[test]
fn a_wrong_database_password_is_an_authentication_failure_said_once() {
    let server = uidgen_store::testing::server_url(uidgen_store::testing::TestDb::MySql).unwrap();
    let (scheme, rest) = server.split_once("://").unwrap();
    let (userinfo, host) = rest.split_once('@').unwrap();
    let user = userinfo.split(':').next().unwrap();
    let url = format!("{scheme}://{user}:not-the-password@{host}");
    let (status, _, err) = run(&["migrate", "--store", &url], &[]);
    assert!(!status.success());
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.contains(&format!("authentication failed for user '{user}'")),
        "{err} (is the MariaDB server of {} up?)",
        uidgen_store::testing::MYSQL_URL_VAR
    );
    assert_eq!(err.matches("Access denied").count(), 1, "said once: {err}");
    assert!(!err.contains("cannot reach"), "{err}");
    assert!(!err.contains("not-the-password"), "{err}");
}

#[test]
fn a_wrong_redis_password_stops_start_up() {
    let redis = uidgen_sharded::testing::PrivateRedis::start();
    assert_eq!(
        redis.command(&["CONFIG", "SET", "requirepass", "s3cret"]),
        "+OK"
    );
    let url = format!("redis://:wrong@127.0.0.1:{}", redis.port());
    let store = sqlite_url("redis-auth");
    let (status, _, err) = run(
        &["serve", "--listen", "127.0.0.1:0"],
        &[
            ("UIDGEN_STORE", &store),
            ("UIDGEN_SHARDED_ENABLED", "true"),
            ("UIDGEN_REDIS_URL", &url),
        ],
    );
    assert!(!status.success(), "started with a wrong Redis password");
    assert!(err.contains("refused the credentials"), "{err}");
    assert!(
        err.contains("check the user and password in `redis.url`"),
        "{err}"
    );
    assert!(!err.contains(":wrong@"), "{err}");
}

#[test]
fn make_with_a_time_before_the_epoch_says_so() {
    let (status, _, err) = run(
        &[
            "make",
            "--time",
            "1999-01-01T00:00:00Z",
            "--worker",
            "1",
            "--seq",
            "1",
        ],
        &[],
    );
    assert!(!status.success());
    assert_eq!(
        err.trim(),
        "error: time 1999-01-01T00:00:00.000Z is before the layout's epoch \
         2026-01-01T00:00:00.000Z: no ID of this layout holds it; give a later time, or a layout \
         whose epoch is earlier"
    );
}

#[test]
fn decode_reads_base36_and_base62_ids_with_form() {
    // The forms the HTTP API writes (`?form=`): uidgen-core's own example on snowflake.
    let id = "1234567890123456789";
    for (form, text) in [
        ("base62", "1TCKi1nFuNh"),
        ("base36", "09do1sj396nf9"),
        ("decimal", id),
    ] {
        let (status, out, err) = run(
            &["decode", "--layout", "snowflake", "--form", form, text],
            &[],
        );
        assert!(status.success(), "{form}: {err}");
        assert!(out.starts_with(&format!("{id} time=")), "{form}: {out}");
    }
    // Decimal stays the default, and a radix text is not guessed as one.
    let (status, _, err) = run(&["decode", "--layout", "snowflake", "1TCKi1nFuNh"], &[]);
    assert!(!status.success());
    assert!(err.contains("1TCKi1nFuNh"), "{err}");
    let (status, _, err) = run(
        &[
            "decode",
            "--layout",
            "snowflake",
            "--form",
            "base62",
            "1TCK!",
        ],
        &[],
    );
    assert!(!status.success());
    assert!(err.contains("\"1TCK!\" as base62"), "{err}");
    // An unknown form is a usage error naming the known ones.
    let (status, _, err) = run(&["decode", "--form", "base64", "1"], &[]);
    assert_eq!(status.code(), Some(2), "{err}");
    assert!(err.contains("decimal, base36, base62 or masked"), "{err}");
    let (status, _, err) = run(
        &["decode", "--layout", "sharded", "--form", "base36", "1"],
        &[],
    );
    assert!(!status.success());
    assert!(err.contains("sharded IDs are decimal only"), "{err}");
}

#[test]
fn decode_unmasks_with_the_configured_keys_and_says_when_there_are_none() {
    // The masked text is the library's (`uidgen_core::mask`), as the HTTP API writes it.
    let layout = uidgen_core::Layout::baidu_default().unwrap();
    let id = layout.compose(&layout.parts(1_000, 7, 3)).unwrap();
    let old = uidgen_core::MaskKey::from_hex(1, "8f4e1c2a9b7d6e5f0a1b2c3d4e5f6a7b").unwrap();
    let text = uidgen_core::Masker::new(vec![old], 1)
        .unwrap()
        .mask(&layout, id)
        .unwrap();
    let keys = "1:8f4e1c2a9b7d6e5f0a1b2c3d4e5f6a7b,2:00112233445566778899aabbccddeeff";
    let (status, out, err) = run(
        &["decode", "--form", "masked", &text],
        &[("UIDGEN_MASK_KEYS", keys)],
    );
    assert!(status.success(), "{err}");
    assert!(
        out.starts_with(&format!("{id} time=")) && out.contains("worker=7 sequence=3"),
        "{out}"
    );
    // Without keys, or with the key retired, the text is refused, saying why.
    let (status, _, err) = run(&["decode", "--form", "masked", &text], &[]);
    assert!(!status.success());
    assert!(err.contains("the masked form needs keys"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    let (status, _, err) = run(
        &["decode", "--form", "masked", &text],
        &[("UIDGEN_MASK_KEYS", "2:00112233445566778899aabbccddeeff")],
    );
    assert!(!status.success());
    assert!(
        err.contains("no configured mask key has this key id"),
        "{err}"
    );
}

#[test]
fn serve_refuses_the_published_placeholder_admin_token() {
    let (status, _, err) = run(
        &["serve", "--listen", "127.0.0.1:0"],
        &[("UIDGEN_ADMIN_TOKEN", "change-me-to-a-long-random-token")],
    );
    assert!(!status.success());
    assert!(
        err.contains("invalid config key `admin_token`: is the published placeholder"),
        "{err}"
    );
}

#[test]
fn health_exits_0_while_the_server_is_ready_and_1_with_the_reason_once_it_stopped() {
    let server = Server::start(&[], &[("UIDGEN_STORE", &sqlite_url("health"))]);
    let base = server.base.clone();
    let addr = base.trim_start_matches("http://").to_owned();
    let port = addr.rsplit_once(':').unwrap().1.to_owned();
    let unspecified = format!("0.0.0.0:{port}");
    // By --url, by the configured listen address, and by an address on every interface
    // (asked on the loopback), as the image's HEALTHCHECK does with UIDGEN_LISTEN=0.0.0.0:8080.
    type Way<'a> = (Vec<&'a str>, Vec<(&'a str, &'a str)>);
    let ways: [Way<'_>; 3] = [
        (vec!["health", "--url", &base], vec![]),
        (vec!["health"], vec![("UIDGEN_LISTEN", addr.as_str())]),
        (
            vec!["health"],
            vec![("UIDGEN_LISTEN", unspecified.as_str())],
        ),
    ];
    for (args, envs) in &ways {
        let (status, out, err) = run(args, envs);
        assert!(status.success(), "{args:?} {envs:?}: {out}{err}");
        assert!(out.contains("/readyz: ready"), "{out}");
    }
    let (status, _) = server.terminate();
    assert!(status.success());
    for (args, envs) in &ways {
        let (status, out, err) = run(args, envs);
        assert_eq!(status.code(), Some(1), "{args:?}: {out}{err}");
        assert_eq!(err.lines().count(), 1, "one line: {err}");
        assert!(
            err.starts_with("error: http://") && err.contains("/readyz did not answer: "),
            "{err}"
        );
    }
    // A URL it cannot use is refused before anything is sent.
    let (status, _, err) = run(&["health", "--url", "https://127.0.0.1:1"], &[]);
    assert_eq!(status.code(), Some(1));
    assert!(err.contains("plain http:// URL"), "{err}");
}

#[test]
fn gen_draws_no_progress_when_stderr_is_no_terminal() {
    let store = sqlite_url("gen-quiet");
    let n = 200_000;
    let (status, out, err) = run(&["gen", "-n", &n.to_string(), "--store", &store], &[]);
    assert!(status.success(), "{err}");
    // Only the IDs on stdout, and nothing on stderr: no bar, no escape codes.
    let ids: Vec<u64> = out.lines().map(|l| l.parse().unwrap()).collect();
    assert_eq!(ids.len(), n);
    assert_unique(ids);
    assert_eq!(err, "", "stderr of a piped run");
}

#[test]
fn gen_draws_a_progress_bar_on_a_terminal_and_clears_it() {
    // `script` gives the command a terminal; the IDs go to a file, so what the terminal shows
    // is stderr alone.
    let dir = temp_dir("gen-terminal");
    let ids_file = dir.join("ids.txt");
    let store = format!("sqlite://{}", dir.join("uidgen.db").display());
    let command = format!(
        "{} gen -n 200000 --store {store} > {}",
        common::binary(),
        ids_file.display()
    );
    let out = std::process::Command::new("script")
        .args(["-qec", &command, "/dev/null"])
        .env("UIDGEN_STATE_DIR", &dir)
        .env("UIDGEN_GRPC_LISTEN", "127.0.0.1:0")
        .env("UIDGEN_WORKER_SINGLE_INSTANCE", "true")
        .env_remove("UIDGEN_CONFIG")
        .output()
        .expect("run script(1) (util-linux)");
    let terminal = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{terminal}");
    assert!(
        terminal.contains("/200000 IDs"),
        "no bar on the terminal: {terminal:?}"
    );
    let ids = std::fs::read_to_string(&ids_file).unwrap();
    assert_eq!(ids.lines().count(), 200_000);
    assert!(!ids.contains("IDs"), "the bar reached stdout");
}

#[test]
fn migrate_lists_each_migration_it_applied_then_says_up_to_date_on_sqlite() {
    let store = sqlite_url("migrate-list");
    assert_migrate_lists(&store);
}

#[test]
fn migrate_lists_each_migration_it_applied_then_says_up_to_date_on_postgres() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let url = runtime
        .block_on(uidgen_store::testing::fresh_url(
            uidgen_store::testing::TestDb::Postgres,
        ))
        .unwrap_or_else(|e| panic!("PostgreSQL is needed (UIDGEN_TEST_POSTGRES_URL): {e}"));
    assert_migrate_lists(&url);
}

/// `uidgen migrate` on the new database `store` lists every migration of its dialect by
/// version and name; run again, it says the schema is up to date.
fn assert_migrate_lists(store: &str) {
    let dialect = uidgen_store::Dialect::from_url(store).unwrap();
    let all = uidgen_store::migrations(dialect);
    let (status, out, err) = run(&["migrate", "--store", store], &[]);
    assert!(status.success(), "{err}");
    let first = out.lines().next().unwrap();
    assert!(first.starts_with("migrated "), "{out}");
    assert!(
        first.ends_with(&format!(
            "applied {} of {} migrations",
            all.len(),
            all.len()
        )),
        "{out}"
    );
    for migration in all {
        let line = format!(
            "  applied {:04} {}",
            migration.version, migration.description
        );
        assert!(
            out.lines().any(|l| l.starts_with(&line)),
            "{line} missing: {out}"
        );
    }
    let (status, out, err) = run(&["migrate", "--store", store], &[]);
    assert!(status.success(), "{err}");
    assert!(
        out.trim_end()
            .ends_with(&format!("already up to date ({} migrations)", all.len())),
        "{out}"
    );
    assert!(!out.contains("  applied"), "{out}");
}

#[tokio::test]
async fn serve_masks_with_the_configured_keys_and_never_logs_a_secret() {
    let secret = "8f4e1c2a9b7d6e5f0a1b2c3d4e5f6a7b";
    let keys = format!("3:{secret}");
    let server = tokio::task::spawn_blocking(move || {
        Server::start(&[], &[("UIDGEN_MASK_KEYS", keys.as_str())])
    })
    .await
    .unwrap();
    let http = reqwest::Client::new();
    let (status, body) = fetch(&http, &server.url("/v1/ids?count=5&form=masked")).await;
    assert_eq!(status, 200, "{body}");
    let texts: serde_json::Value = serde_json::from_str(&body).unwrap();
    let first = texts["ids"][0].as_str().unwrap().to_owned();
    assert!(first.starts_with("3_"), "{body}");
    // `uidgen decode` reads it with the same keys from the environment.
    let env = format!("3:{secret}");
    let (status, out, err) = run(
        &["decode", "--form", "masked", &first],
        &[("UIDGEN_MASK_KEYS", env.as_str())],
    );
    assert!(status.success(), "{err}");
    assert!(
        out.contains(&format!("worker={}", server.worker_id())),
        "{out}"
    );
    let log = server.log();
    assert!(log.contains("1 keys, key 3 masks"), "{log}");
    assert!(!log.contains(secret), "the secret is in the log:\n{log}");
}
