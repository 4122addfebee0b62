//! The browser side of the console tests: a chromedriver process of the test's own, a headless
//! Chromium session through it, and small waits and lookups on the page.

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use fantoccini::elements::Element;
use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{Value, json};

/// How long the page gets to show what it is waiting for; a bound on a hang, not a timing claim.
pub const PATIENCE: Duration = Duration::from_secs(30);

/// A chromedriver process this test started; killed when dropped.
pub struct Chromedriver {
    child: Child,
    url: String,
}

impl Drop for Chromedriver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn tool(var: &str, default: &str) -> String {
    let path = std::env::var(var).unwrap_or_else(|_| default.to_owned());
    assert!(
        std::path::Path::new(&path).exists(),
        "{path} not found: the console test drives headless Chromium through chromedriver. \
         Install Debian's `chromium` and `chromium-driver` (scripts/test.sh does, in ensure_chromium), \
         or point {var} at the binary"
    );
    path
}

pub async fn start_chromedriver() -> Chromedriver {
    let path = tool("UIDGEN_CHROMEDRIVER", "/usr/bin/chromedriver");
    let port = uidgen_worker::testing::free_port();
    let child = Command::new(&path)
        .arg(format!("--port={port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start chromedriver {path} (UIDGEN_CHROMEDRIVER): {e}"));
    let driver = Chromedriver {
        child,
        url: format!("http://127.0.0.1:{port}"),
    };
    let status = format!("{}/status", driver.url);
    let http = reqwest::Client::new();
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while http.get(&status).send().await.is_err() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "chromedriver {path} did not answer on {status}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    driver
}

pub async fn browser(driver: &Chromedriver) -> Client {
    let chromium = tool("UIDGEN_CHROMIUM", "/usr/bin/chromium");
    let capabilities = json!({
        "goog:chromeOptions": {
            "binary": chromium,
            // Root in a container: no sandbox; /dev/shm is small there.
            "args": ["--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1280,1320"],
        }
    });
    let Value::Object(capabilities) = capabilities else {
        unreachable!()
    };
    ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
        .capabilities(capabilities)
        .connect(&driver.url)
        .await
        .unwrap_or_else(|e| {
            panic!("chromedriver could not start {chromium} (UIDGEN_CHROMIUM): {e}")
        })
}

/// Poll `check` until it gives a value; fail naming `what` once [`PATIENCE`] is over.
pub async fn eventually<T, F, Fut>(what: &str, check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let what = format!("the console never showed {what}");
    uidgen_testkit::eventually_some(&what, PATIENCE.as_secs(), check).await
}

pub async fn text(c: &Client, css: &str) -> Option<String> {
    c.find(Locator::Css(css)).await.ok()?.text().await.ok()
}

pub async fn input(c: &Client, css: &str) -> Element {
    c.find(Locator::Css(css)).await.unwrap()
}

pub async fn fill(c: &Client, css: &str, value: &str) {
    let field = input(c, css).await;
    field.clear().await.unwrap();
    field.send_keys(value).await.unwrap();
}

pub async fn click(c: &Client, css: &str) {
    input(c, css).await.click().await.unwrap();
}

pub async fn displayed(c: &Client, css: &str) -> bool {
    match c.find(Locator::Css(css)).await {
        Ok(e) => e.is_displayed().await.unwrap(),
        Err(_) => false,
    }
}

/// The text of `css` once `accept` takes it (waiting as [`eventually`] does, naming `what`).
pub async fn text_when(
    c: &Client,
    what: &str,
    css: &str,
    accept: impl Fn(&String) -> bool,
) -> String {
    eventually(what, || async { text(c, css).await.filter(|t| accept(t)) }).await
}

/// Wait until `css` is displayed (as [`eventually`] does, naming `what`).
pub async fn until_displayed(c: &Client, what: &str, css: &str) {
    eventually(what, || async { displayed(c, css).await.then_some(()) }).await;
}

/// How many elements `css` matches.
pub async fn count(c: &Client, css: &str) -> usize {
    c.find_all(Locator::Css(css)).await.unwrap().len()
}
