//! The web console in a real browser: headless Chromium driven through chromedriver (WebDriver,
//! `fantoccini`) against a real `uidgen serve`. It decodes an ID, makes one, sees bad fields
//! rejected with the server's messages, sees the live numbers move, uses an admin token, sees
//! the server go away, and saves a screenshot.
//!
//! Needs Debian's `chromium` and `chromium-driver` (scripts/test.sh installs them); other paths
//! through `UIDGEN_CHROMEDRIVER` and `UIDGEN_CHROMIUM`. `UIDGEN_CONSOLE_SCREENSHOT=<file.png>`
//! also writes the screenshot there (how docs/console.png is made).
#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

mod browser;
#[path = "../common/mod.rs"]
mod common;

use browser::{
    Chromedriver, browser, click, count, displayed, eventually, fill, input, start_chromedriver,
    text, text_when, until_displayed,
};
use common::{Server, sqlite_url, temp_dir};
use fantoccini::Locator;
use serde_json::{Value, json};

/// Type `ids` into the decode box and press Decode.
async fn decode(c: &fantoccini::Client, ids: &str) {
    fill(c, "#decode-input", ids).await;
    click(c, "#decode-btn").await;
}

/// Pick the `layout` preset, then [`decode`] `ids`.
async fn decode_with(c: &fantoccini::Client, layout: &str, ids: &str) {
    input(c, "#decode-layout")
        .await
        .select_by_value(layout)
        .await
        .unwrap();
    decode(c, ids).await;
}

const TOKEN: &str = "console-test-admin-token";

/// A chromedriver of the test's own, and a server with the admin token, a SQLite store named
/// after `store` and `more`.
async fn start_with_admin_token(store: &str, more: &[(&str, &str)]) -> (Chromedriver, Server) {
    let driver = start_chromedriver().await;
    let store = sqlite_url(store);
    let mut env = vec![
        ("UIDGEN_STORE", store.as_str()),
        ("UIDGEN_ADMIN_TOKEN", TOKEN),
    ];
    env.extend_from_slice(more);
    (driver, Server::start(&[], &env))
}

/// Keep, in the page, every breach of its own Content-Security-Policy from here on
/// (`cspViolations`, which [`assert_csp_kept`] reads).
async fn watch_csp(c: &fantoccini::Client) {
    script(
        c,
        "window.cspViolations = []; document.addEventListener('securitypolicyviolation', (e) => cspViolations.push(e.violatedDirective + ' ' + e.blockedURI));",
    )
    .await;
}

/// What `POST /v1/ids/make` answers to `body`.
async fn make_by_api(server: &Server, body: &str) -> Value {
    api(
        reqwest::Method::POST,
        server.url("/v1/ids/make"),
        Some(body),
    )
    .await
}

/// Run `js` in the page; what it returns.
async fn script(c: &fantoccini::Client, js: &str) -> Value {
    c.execute(js, vec![]).await.unwrap()
}

/// Type `value` into `field`, then press `button`.
async fn enter(c: &fantoccini::Client, field: &str, value: &str, button: &str) {
    fill(c, field, value).await;
    click(c, button).await;
}

/// No breach of the page's Content-Security-Policy since [`watch_csp`].
async fn assert_csp_kept(c: &fantoccini::Client) {
    let violations = script(c, "return cspViolations;").await;
    assert_eq!(violations, json!([]), "the page broke its own CSP");
}

/// What the JSON API answers, for comparing with what the page shows.
async fn api(method: reqwest::Method, url: String, body: Option<&str>) -> Value {
    let mut request = reqwest::Client::new().request(method, url);
    if let Some(body) = body {
        request = request
            .header("content-type", "application/json")
            .body(body.to_owned());
    }
    let text = request.send().await.unwrap().text().await.unwrap();
    common::json(&text)
}

fn number(text: &str) -> u64 {
    text.replace(',', "")
        .parse()
        .unwrap_or_else(|e| panic!("{e}: {text:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_decodes_makes_rejects_bad_fields_and_shows_live_state_in_chromium() {
    let (driver, server) = start_with_admin_token("console", &[]).await;
    let c = browser(&driver).await;
    c.goto(&server.url("/")).await.unwrap();
    // Whatever the page renders from here on must pass its own Content-Security-Policy.
    watch_csp(&c).await;

    // Live: the first status arrives and names the worker id the server logged.
    let status = api(reqwest::Method::GET, server.url("/v1/status"), None).await;
    let worker = status["worker_id"].as_u64().unwrap();
    text_when(&c, "the worker id", "#live-worker", |t| {
        *t == worker.to_string()
    })
    .await;
    assert_eq!(
        text(&c, "#live-assigner").await.unwrap(),
        "assigned: disposable"
    );
    assert!(text(&c, "#live-ring-fill").await.unwrap().ends_with('%'));
    // The runway: the default layout (28 bits of seconds from 2026) runs out in 2034, years
    // away, so in years and not coloured as a warning.
    let runs_out = status["runway"]["runs_out_at"].as_str().unwrap()[..10].to_owned();
    assert!(runs_out.starts_with("2034-"), "{status}");
    let runway = text(&c, "#live-runway").await.unwrap();
    assert!(runway.ends_with(" years"), "{runway}");
    let sub = text(&c, "#live-runway-sub").await.unwrap();
    assert!(sub.starts_with(&format!("runs out {runs_out};")), "{sub}");
    let class = input(&c, "#live-runway").await.attr("class").await.unwrap();
    assert_eq!(class.as_deref(), Some("value"), "no warning class");

    // Decode: an ID the server issued, with its 64 bits and both times.
    let issued = api(reqwest::Method::GET, server.url("/v1/ids?count=3"), None).await;
    let id = issued["ids"][0].as_u64().unwrap();
    let expected = api(
        reqwest::Method::GET,
        server.url(&format!("/v1/ids/{id}")),
        None,
    )
    .await;
    decode(&c, &format!("{id}, 12x")).await;
    let card = "#decode-results .card.decoded";
    eventually("the decoded card", || async {
        text(&c, &format!("{card} .id")).await
    })
    .await;
    assert_eq!(
        text(&c, &format!("{card} .id")).await.unwrap(),
        id.to_string()
    );
    assert_eq!(
        number(&text(&c, &format!("{card} .field-worker")).await.unwrap()),
        worker
    );
    assert_eq!(
        text(&c, &format!("{card} .time-utc")).await.unwrap(),
        expected["timestamp"].as_str().unwrap()
    );
    assert!(
        !text(&c, &format!("{card} .time-local"))
            .await
            .unwrap()
            .is_empty()
    );
    let bits = c
        .find_all(Locator::Css(&format!("{card} .bits span")))
        .await
        .unwrap();
    let mut shown = String::new();
    for bit in &bits {
        shown.push_str(&bit.text().await.unwrap());
    }
    assert_eq!(
        shown,
        format!("{id:064b}"),
        "the 64 bits, most significant first"
    );
    let time_bits = count(&c, &format!("{card} .bits span.f-time")).await;
    assert_eq!(time_bits, 28, "baidu's time field is coloured as time");
    // The second, malformed ID gets the server's own message.
    let malformed = api(reqwest::Method::GET, server.url("/v1/ids/12x"), None).await;
    assert_eq!(
        text(&c, "#decode-results .card.failed .error")
            .await
            .unwrap(),
        malformed["message"].as_str().unwrap()
    );
    // Another preset decodes the same bits differently.
    decode_with(&c, "snowflake", &id.to_string()).await;
    let snowflake = api(
        reqwest::Method::GET,
        server.url(&format!("/v1/ids/{id}?layout=snowflake")),
        None,
    )
    .await;
    eventually("the snowflake decoding", || async {
        text(&c, &format!("{card} .time-utc"))
            .await
            .filter(|t| t == snowflake["timestamp"].as_str().unwrap())
    })
    .await;
    // A form and a zone: the ID read back from its base62 text, its time as the server shows it
    // in that zone (which names it), and the text beside the decimal.
    let base62 = uidgen_core::IdForm::Base62;
    let written = base62.encode(id, base62.width(i64::MAX.unsigned_abs()));
    let zoned = api(
        reqwest::Method::GET,
        server.url(&format!("/v1/ids/{written}?form=base62&tz=Asia/Shanghai")),
        None,
    )
    .await;
    assert_eq!(zoned["id"].as_u64(), Some(id), "{zoned}");
    for (select, value) in [
        ("#decode-idform", "base62"),
        ("#decode-tz", "Asia/Shanghai"),
    ] {
        input(&c, select)
            .await
            .select_by_value(value)
            .await
            .unwrap();
    }
    // The server runs the default layout.
    decode_with(&c, "baidu", &written).await;
    eventually("the zoned decoding", || async {
        text(&c, &format!("{card} .time-zone"))
            .await
            .filter(|t| t == zoned["timestamp"].as_str().unwrap())
    })
    .await;
    assert!(
        zoned["timestamp"]
            .as_str()
            .unwrap()
            .ends_with("[Asia/Shanghai]")
    );
    assert_eq!(
        text(&c, &format!("{card} .field-text")).await.unwrap(),
        written
    );
    assert_eq!(
        text(&c, &format!("{card} .id")).await.unwrap(),
        id.to_string()
    );
    assert_eq!(
        text(&c, &format!("{card} .time-utc")).await.unwrap(),
        expected["timestamp"].as_str().unwrap()
    );
    for (select, value) in [("#decode-idform", "decimal"), ("#decode-tz", "UTC")] {
        input(&c, select)
            .await
            .select_by_value(value)
            .await
            .unwrap();
    }

    // Make: fields in, the server's ID out.
    let body = r#"{"timestamp":"2026-06-01T12:00:00Z","worker":7,"sequence":3}"#;
    let made = make_by_api(&server, body).await;
    let made_id = made["id"].to_string();
    fill(&c, "#make-timestamp", "2026-06-01T12:00:00Z").await;
    fill(&c, "#make-worker", "7").await;
    enter(&c, "#make-sequence", "3", "#make-btn").await;
    text_when(&c, "the made ID", "#make-result .id", |t| *t == made_id).await;

    // Bad fields: each marked with the server's own message.
    let bad = r#"{"timestamp":"2026-06-01T12:00:00Z","worker":99999999,"sequence":99999}"#;
    let rejected = make_by_api(&server, bad).await;
    fill(&c, "#make-worker", "99999999").await;
    enter(&c, "#make-sequence", "99999", "#make-btn").await;
    for field in ["worker", "sequence"] {
        let message = rejected["fields"][field].as_str().unwrap().to_owned();
        eventually(&format!("the {field} field's error"), || async {
            text(&c, &format!("#make-{field}-error"))
                .await
                .filter(|t| *t == message)
        })
        .await;
        let class = input(&c, &format!("#make-{field}"))
            .await
            .attr("class")
            .await
            .unwrap();
        assert_eq!(class.as_deref(), Some("invalid"));
    }
    assert!(text(&c, "#make-result").await.unwrap().is_empty());

    // Live numbers move: IDs issued elsewhere show up in the count and the rate.
    let before = text_when(&c, "a count of issued IDs", "#live-issued", |t| t != "–").await;
    api(reqwest::Method::GET, server.url("/v1/ids?count=5000"), None).await;
    text_when(&c, "the issued count rising by 5000", "#live-issued", |t| {
        number(t) >= number(&before) + 5000
    })
    .await;
    text_when(&c, "a rate of IDs per second", "#live-rate", |t| {
        t.chars().next().is_some_and(|ch| ch.is_ascii_digit())
    })
    .await;
    // The chart draws a line once two samples exist.
    eventually("the chart", || async {
        let d = input(&c, "#chart-line").await.attr("d").await.ok()??;
        (!d.is_empty()).then_some(())
    })
    .await;
    // Leaf's sample tag, drawn as two bars once it has loaded a segment.
    api(
        reqwest::Method::GET,
        server.url("/v1/segments/leaf-segment-test?count=700"),
        None,
    )
    .await;
    eventually("the segment tag's double buffer", || async {
        let rows = c
            .find_all(Locator::Css("#segment-table tbody tr"))
            .await
            .ok()?;
        let row = rows.first()?;
        let bars = row.find_all(Locator::Css(".seg")).await.ok()?;
        let text = row.text().await.ok()?;
        (text.contains("leaf-segment-test") && text.contains("left") && bars.len() == 2)
            .then_some(())
    })
    .await;

    // Admin: nothing to do without a token; with it, a tag is created through a bearer header.
    assert!(!displayed(&c, "#admin-actions").await);
    enter(&c, "#admin-token", TOKEN, "#token-btn").await;
    until_displayed(
        &c,
        "the admin form, once the token is checked",
        "#admin-actions",
    )
    .await;
    assert!(
        !c.current_url().await.unwrap().as_str().contains(TOKEN),
        "the token never goes into a URL"
    );
    fill(&c, "#tag-name", "console-tag").await;
    enter(&c, "#tag-step", "500", "#tag-btn").await;
    text_when(&c, "the saved tag", "#tag-result", |t| {
        t.starts_with("saved console-tag")
    })
    .await;
    let from_tag = reqwest::get(server.url("/api/segment/get/console-tag"))
        .await
        .unwrap();
    assert!(
        from_tag.status().is_success(),
        "the console created the tag"
    );

    assert_csp_kept(&c).await;
    // The page asked for nothing the server does not have (no 404s: no icon, no missing file).
    let metrics = reqwest::get(server.url("/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        !metrics.contains("kind=\"not_found\""),
        "the console requested a missing path: {metrics}"
    );

    let shot = c.screenshot().await.unwrap();
    assert!(shot.starts_with(b"\x89PNG"), "a PNG screenshot");
    let path = temp_dir("console").join("console.png");
    std::fs::write(&path, &shot).unwrap();
    eprintln!("screenshot: {}", path.display());
    if let Ok(extra) = std::env::var("UIDGEN_CONSOLE_SCREENSHOT") {
        std::fs::write(extra, &shot).unwrap();
    }

    // The API reference, rendered in the page from /openapi.json: every operation.
    let doc = api(reqwest::Method::GET, server.url("/openapi.json"), None).await;
    let operations: usize = doc["paths"]
        .as_object()
        .unwrap()
        .values()
        .map(|item| item.as_object().unwrap().len())
        .sum();
    click(&c, "#api summary").await;
    eventually("every operation in the API reference", || async {
        let ops = c.find_all(Locator::Css("#api-body .op")).await.ok()?;
        (ops.len() == operations).then_some(())
    })
    .await;
    let make_op = text(&c, "#api-body").await.unwrap();
    assert!(make_op.contains("/v1/ids/make") && make_op.contains("MakeRequest"));

    // However long the page stays open, the chart holds 10 minutes of samples, no more.
    let kept = script(
        &c,
        "for (let i = 0; i < 5000; i++) pushRate(i % 7); return chart.rates.length;",
    )
    .await;
    assert_eq!(kept.as_u64(), Some(600), "the chart's samples are bounded");
    // The server goes away: the page says so instead of showing stale figures as live.
    let _ = server.terminate();
    until_displayed(&c, "the unreachable banner", "#offline").await;
    assert!(
        text(&c, "#offline")
            .await
            .unwrap()
            .contains("The server does not answer")
    );
    assert_eq!(text(&c, "#conn").await.unwrap(), "unreachable");
    c.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_shows_the_zookeeper_holder_and_the_sharded_mode() {
    let connect = uidgen_zk::testing::test_connect();
    uidgen_zk::testing::init_namespace(&connect, "console")
        .await
        .unwrap();
    let redis = uidgen_sharded::testing::redis_url();
    uidgen_sharded::testing::check_redis(&redis).await.unwrap();
    let prefix = uidgen_sharded::testing::unique_prefix("console");
    let dir = temp_dir("console-modes");
    let store = format!("sqlite://{}", dir.join("uidgen.db").display());
    let app = uidgen_store::AppSpec {
        step: 100,
        ..uidgen_store::AppSpec::new(9, "console-app")
    };
    let db = uidgen_store::Store::connect(&store).await.unwrap();
    db.create_or_update_app(&app).await.unwrap();
    db.close().await;
    let cache = dir.join("zk.state").display().to_string();
    let driver = start_chromedriver().await;
    let server = Server::start(
        &[],
        &[
            ("UIDGEN_STORE", &store),
            ("UIDGEN_WORKER_ASSIGNER", "zookeeper"),
            ("UIDGEN_ZK_CONNECT", &connect),
            ("UIDGEN_ZK_NAME", "console"),
            ("UIDGEN_ZK_CACHE_FILE", &cache),
            ("UIDGEN_LAYOUT", "leaf"),
            ("UIDGEN_GENERATOR", "snowflake"),
            ("UIDGEN_SEGMENT_ENABLED", "false"),
            ("UIDGEN_SHARDED_ENABLED", "true"),
            ("UIDGEN_REDIS_URL", &redis),
            ("UIDGEN_SHARDED_KEY_PREFIX", &prefix),
        ],
    );
    let c = browser(&driver).await;
    c.goto(&server.url("/")).await.unwrap();

    eventually("the ZooKeeper holder", || async {
        let shown = text(&c, "#zk-list").await?;
        (shown.contains("connected\nyes") && shown.contains("issuing\nyes")).then_some(())
    })
    .await;
    assert_eq!(
        text(&c, "#live-assigner").await.unwrap(),
        "assigned: zookeeper"
    );
    assert_eq!(text(&c, "#live-ring-fill").await.unwrap(), "no ring");
    assert!(!displayed(&c, "#segments").await, "segment mode is off");

    // Sharded: the app list, and the counters moving with what is popped.
    let batch = api(
        reqwest::Method::GET,
        server.url("/v1/apps/9/ids?gate_pass=alice&count=10"),
        None,
    )
    .await;
    let id = batch["ids"][0].as_u64().unwrap();
    eventually("the sharded app and its popped IDs", || async {
        let apps = text(&c, "#apps").await?;
        let counters = text(&c, "#sharded-list").await?;
        (apps.contains("console-app") && counters.contains("ids popped\n10")).then_some(())
    })
    .await;
    // A sharded ID decodes as app, shard and index, coloured by those fields.
    decode_with(&c, "sharded", &id.to_string()).await;
    text_when(
        &c,
        "the sharded decoding",
        "#decode-results .card.decoded .field-app_id",
        |t| t == "9",
    )
    .await;
    let app_bits = count(&c, "#decode-results .bits span.f-app_id").await;
    assert_eq!(app_bits, 8);
    c.close().await.unwrap();
    drop(server);
    uidgen_sharded::testing::delete_prefix(&redis, &prefix).await;
}

/// The console's rough edges, each checked where a person meets it, on a 420 px wide window
/// (a phone): the API reference's sentences, a tag never used, a wrong token, a bad step, the
/// local time's zone, the chart's peak when idle, and no sideways scrolling.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_reads_well_on_a_phone_and_says_what_is_wrong_in_words() {
    let (driver, server) = start_with_admin_token(
        "console-polish",
        &[
            // A datacenter field, for the make panel's datacenter input below.
            ("UIDGEN_LAYOUT_DATACENTER_BITS", "5"),
            ("UIDGEN_LAYOUT_DATACENTER_ID", "3"),
        ],
    )
    .await;
    // A tag created and never used: no segment of it has been loaded.
    let created = reqwest::Client::new()
        .put(server.url("/v1/admin/segments/never-used"))
        .bearer_auth(TOKEN)
        .body(r#"{"step":300}"#)
        .send()
        .await
        .unwrap();
    assert!(created.status().is_success());
    let c = browser(&driver).await;
    c.set_window_size(420, 1200).await.unwrap();
    c.goto(&server.url("/")).await.unwrap();

    // The unused tag shows its stored step, not "0 (min 1)".
    let row = eventually("the unused tag's row", || async {
        let rows = c
            .find_all(Locator::Css("#segment-table tbody tr"))
            .await
            .ok()?;
        for row in rows {
            let text = row.text().await.ok()?;
            if text.contains("never-used") {
                return Some(text);
            }
        }
        None
    })
    .await;
    assert!(row.contains("300 (stored; no segment loaded yet)"), "{row}");
    assert!(!row.contains("(min"), "{row}");

    // Nothing scrolls sideways at 420 px, the segment table included.
    let widths = script(
        &c,
        "const t = document.getElementById('segment-table'); \
             return [document.documentElement.scrollWidth, document.documentElement.clientWidth, \
                     t.scrollWidth, t.parentElement.clientWidth];",
    )
    .await;
    let w: Vec<u64> = serde_json::from_value(widths).unwrap();
    assert!(w[0] <= w[1], "the page scrolls sideways at 420 px: {w:?}");
    assert!(
        w[2] <= w[3],
        "the segment table is wider than its section: {w:?}"
    );

    // Idle: the chart's peak is 0/s, not 1/s (nothing has issued an ID).
    eventually("two idle samples", || async {
        let n = c
            .execute(
                "return chart.rates.filter((r) => r !== null).length;",
                vec![],
            )
            .await
            .ok()?;
        (n.as_u64()? >= 2).then_some(())
    })
    .await;
    assert_eq!(text(&c, "#chart-max").await.unwrap(), "0");

    // The local time names its zone once ("UTC", never "UTC (UTC)").
    let shown = script(&c, "return local(Date.UTC(2026, 10, 22, 19, 11, 15));").await;
    let shown = shown.as_str().unwrap().to_owned();
    let zone = script(
        &c,
        "return Intl.DateTimeFormat().resolvedOptions().timeZone;",
    )
    .await;
    let zone = zone.as_str().unwrap();
    assert!(shown.matches(zone).count() <= 1, "the zone twice: {shown}");
    assert!(!shown.contains("UTC (UTC)"), "{shown}");

    // A layout with a datacenter field: make takes one (the served 3 when empty), and the
    // answer shows it beside the worker.
    fill(&c, "#make-timestamp", "2026-06-01T12:00:00Z").await;
    fill(&c, "#make-worker", "7").await;
    fill(&c, "#make-sequence", "3").await;
    enter(&c, "#make-datacenter", "30", "#make-btn").await;
    let made = make_by_api(
        &server,
        r#"{"timestamp":"2026-06-01T12:00:00Z","worker":7,"sequence":3,"datacenter":30}"#,
    )
    .await;
    let made_id = made["id"].to_string();
    text_when(
        &c,
        "the made ID with its datacenter",
        "#make-result .id",
        |t| *t == made_id,
    )
    .await;
    assert_eq!(
        text(&c, "#make-result .field-datacenter").await.unwrap(),
        "30"
    );
    assert_eq!(made["datacenter"], 30);
    let datacenter_bits = count(&c, "#make-result .bits span.f-datacenter").await;
    assert_eq!(
        datacenter_bits, 5,
        "the datacenter field is coloured as such"
    );

    // A wrong token is refused at once, not at the first save; the right one is accepted.
    enter(
        &c,
        "#admin-token",
        "a-wrong-token-of-some-length",
        "#token-btn",
    )
    .await;
    text_when(&c, "the wrong token refused", "#token-result", |t| {
        t.starts_with("token refused")
    })
    .await;
    assert!(
        !displayed(&c, "#admin-actions").await,
        "a wrong token opened the admin form"
    );
    let kept = script(&c, "return sessionStorage.length;").await;
    assert_eq!(kept.as_u64(), Some(0), "a wrong token was kept");
    enter(&c, "#admin-token", TOKEN, "#token-btn").await;
    until_displayed(&c, "the right token accepted", "#admin-actions").await;
    assert_eq!(text(&c, "#token-result").await.unwrap(), "token accepted");
    let tags_before = api(reqwest::Method::GET, server.url("/v1/segments"), None).await;
    assert!(
        !tags_before.to_string().contains("token-check"),
        "checking the token created a tag"
    );

    // A bad step is said in words, before anything is sent.
    fill(&c, "#tag-name", "polish-tag").await;
    enter(&c, "#tag-step", "12x", "#tag-btn").await;
    let said = text_when(&c, "the bad step's message", "#tag-result", |t| {
        !t.is_empty()
    })
    .await;
    assert_eq!(
        said,
        "the step must be a whole number from 1 to 1,000,000,000, not “12x”"
    );
    enter(&c, "#tag-step", "0", "#tag-btn").await;
    text_when(&c, "the zero step's message", "#tag-result", |t| {
        t.ends_with("not “0”")
    })
    .await;
    let tags = api(reqwest::Method::GET, server.url("/v1/segments"), None).await;
    assert!(
        !tags.to_string().contains("polish-tag"),
        "a bad step was sent"
    );

    // The API reference: whole sentences, code as code, no stray backticks.
    click(&c, "#api summary").await;
    let summaries = eventually("the API reference", || async {
        let all = c
            .find_all(Locator::Css("#api-body .op .summary"))
            .await
            .ok()?;
        let mut texts = Vec::new();
        for one in all {
            texts.push(one.text().await.ok()?);
        }
        (!texts.is_empty()).then_some(texts)
    })
    .await;
    assert!(
        summaries.iter().all(|s| !s.contains('`')),
        "literal backticks: {summaries:?}"
    );
    assert!(
        summaries
            .iter()
            .any(|s| s.ends_with("from the default space, as Leaf would.")),
        "a summary cut mid-sentence: {summaries:?}"
    );
    let code = c
        .find_all(Locator::Css("#api-body .op .summary code"))
        .await
        .unwrap();
    assert!(!code.is_empty(), "code spans are not shown as code");
    c.close().await.unwrap();
}

/// With `auth.required` on, the console asks for a caller token in plain words (no red banner,
/// no error cards), keeps it for the tab only, and with it the segment table, Decode and Make
/// work.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_takes_a_caller_token_and_works_with_auth_required_in_chromium() {
    let (driver, server) =
        start_with_admin_token("console-auth", &[("UIDGEN_AUTH_REQUIRED", "true")]).await;
    let http = reqwest::Client::new();
    let created = common::text(
        http.post(server.url("/v1/admin/tokens"))
            .bearer_auth(TOKEN)
            .body(r#"{"name": "console", "routes": ["ids", "segments"], "tags": ["*"]}"#),
    )
    .await;
    let caller = common::json(&created)["token"].as_str().unwrap().to_owned();
    let c = browser(&driver).await;
    c.goto(&server.url("/")).await.unwrap();
    watch_csp(&c).await;

    // Without a token: the form asks for one, the segment table says why it is empty.
    until_displayed(&c, "the caller-token form", "#caller-form").await;
    assert!(
        text(&c, "#caller-needed")
            .await
            .unwrap()
            .contains("asks for a caller token"),
    );
    let note = text_when(&c, "the segment table's note", "#segments-note", |t| {
        !t.is_empty()
    })
    .await;
    assert!(note.contains("asks for a caller token"), "{note}");
    decode(&c, "12345").await;
    let card = eventually("the decode card asking for a token", || async {
        text(&c, "#decode-results .caller-needed").await
    })
    .await;
    assert!(card.contains("asks for a caller token"), "{card}");
    assert!(
        !displayed(&c, "#stopped").await,
        "a red banner: {:?}",
        text(&c, "#stopped").await
    );
    assert!(!displayed(&c, "#offline").await);

    // A wrong token is refused at once and not kept.
    enter(
        &c,
        "#caller-token",
        "uidgen_not-a-real-token",
        "#caller-btn",
    )
    .await;
    text_when(
        &c,
        "the wrong caller token refused",
        "#caller-result",
        |t| t.starts_with("caller token refused"),
    )
    .await;
    let kept = script(&c, "return sessionStorage.getItem('uidgen.callerToken');").await;
    assert_eq!(kept, Value::Null, "a wrong token was kept");

    // The right one: kept in this tab's sessionStorage only, never in a URL.
    enter(&c, "#caller-token", &caller, "#caller-btn").await;
    text_when(&c, "the caller token kept", "#caller-result", |t| {
        t == "caller token kept for this tab"
    })
    .await;
    let stored = script(
        &c,
        "return [sessionStorage.getItem('uidgen.callerToken'), localStorage.length];",
    )
    .await;
    assert_eq!(stored, json!([caller, 0]));
    assert!(!c.current_url().await.unwrap().as_str().contains(&caller));

    // With it: the segment table, Decode and Make.
    eventually("the segment table with the sample tag", || async {
        let rows = c
            .find_all(Locator::Css("#segment-table tbody tr"))
            .await
            .ok()?;
        let first = rows.first()?.text().await.ok()?;
        first.contains("leaf-segment-test").then_some(())
    })
    .await;
    assert!(!displayed(&c, "#segments-note").await);
    let issued = common::text(http.get(server.url("/v1/ids?count=1")).bearer_auth(&caller)).await;
    let id = common::json(&issued)["ids"][0].as_u64().unwrap();
    decode(&c, &id.to_string()).await;
    let decoded = eventually("the decoded card", || async {
        text(&c, "#decode-results .card.decoded .id").await
    })
    .await;
    assert_eq!(decoded, id.to_string());
    click(&c, "#make-btn").await;
    eventually("the made ID", || async {
        text(&c, "#make-result .card.decoded .id").await
    })
    .await;
    assert!(!displayed(&c, "#make-error").await);
    assert!(!displayed(&c, "#stopped").await);

    assert_csp_kept(&c).await;
    c.close().await.unwrap();
}
