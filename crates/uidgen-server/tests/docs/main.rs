//! Every console example of README.md and docs/API.md, run against a live `uidgen serve` (the
//! real binary) with real curl, and compared with the answer the document shows.
//!
//! The conventions the documents follow are in `markdown.rs`: a block names the server it needs
//! (`# server: UIDGEN_LAYOUT=vesta_max_peak`), placeholders stand for what the clock changes,
//! and a block that cannot run says why (`# not run: ...`). Anything else that cannot run fails
//! this test, so no example escapes it.
#![allow(clippy::unwrap_used)] // tests: a panic is the failure report

#[path = "../common/mod.rs"]
mod common;
mod markdown;
mod migrating;

use std::collections::HashMap;
use std::path::Path;
use std::process::Command;

use common::{Server, binary, sqlite_url, temp_dir};
use markdown::{Block, Step, console_blocks, matches};

/// The documents whose examples run, relative to the workspace root.
const DOCUMENTS: [&str; 2] = ["README.md", "docs/API.md"];

/// The programs an example may call.
const PROGRAMS: [&str; 2] = ["curl", "uidgen"];

/// The address the documents show; each example reaches its own server instead.
const SHOWN_ADDRESSES: [&str; 2] = ["localhost:8080", "127.0.0.1:8080"];

fn workspace() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .parent()
        .unwrap()
}

/// One document's servers, by the variables they were started with.
struct Servers {
    started: HashMap<Vec<(String, String)>, Started>,
    redis_prefixes: Vec<String>,
}

struct Started {
    server: Server,
    /// The admin token it was started with, for `$UIDGEN_ADMIN_TOKEN` in commands.
    token: Option<String>,
}

impl Servers {
    fn for_block(&mut self, block: &Block, name: &str) -> &Started {
        let key = block.server.clone();
        if !self.started.contains_key(&key) {
            let mut envs: Vec<(String, String)> = block.server.clone();
            let has = |envs: &[(String, String)], name: &str| envs.iter().any(|(n, _)| n == name);
            if !has(&envs, "UIDGEN_STORE") {
                envs.push(("UIDGEN_STORE".into(), sqlite_url(&format!("docs-{name}"))));
            }
            if envs
                .iter()
                .any(|(n, v)| n == "UIDGEN_SHARDED_ENABLED" && v == "true")
            {
                let url = uidgen_sharded::testing::redis_url();
                runtime()
                    .block_on(uidgen_sharded::testing::check_redis(&url))
                    .unwrap();
                let prefix = uidgen_sharded::testing::unique_prefix("docs");
                envs.push(("UIDGEN_REDIS_URL".into(), url));
                envs.push(("UIDGEN_SHARDED_KEY_PREFIX".into(), prefix.clone()));
                self.redis_prefixes.push(prefix);
            }
            let token = envs
                .iter()
                .find(|(n, _)| n == "UIDGEN_ADMIN_TOKEN")
                .map(|(_, v)| v.clone());
            let refs: Vec<(&str, &str)> =
                envs.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
            let server = Server::start(&[], &refs);
            self.started.insert(key.clone(), Started { server, token });
        }
        &self.started[&key]
    }
}

impl Drop for Servers {
    fn drop(&mut self) {
        let url = uidgen_sharded::testing::redis_url();
        for prefix in &self.redis_prefixes {
            runtime().block_on(uidgen_sharded::testing::delete_prefix(&url, prefix));
        }
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// The program a command calls: its first word after any `NAME=value` assignments.
fn program(command: &str) -> &str {
    command
        .split_whitespace()
        .find(|word| !word.contains('='))
        .unwrap_or_default()
}

/// Run one step in bash against `started`; `Err` says how it differs from the document.
///
/// `given` holds what the block's `# varies:` values stood for so far: later commands are run
/// with those.
fn run(
    block: &Block,
    step: &Step,
    started: &Started,
    cwd: &Path,
    given: &mut Vec<(String, String)>,
) -> Result<(), String> {
    let port = started.server.base.trim_start_matches("http://");
    let mut command = step.command.clone();
    for (shown, actual) in given.iter() {
        command = command.replace(shown.as_str(), actual);
    }
    for shown in SHOWN_ADDRESSES {
        command = command.replace(shown, port);
    }
    // Each curl reports its HTTP status on stderr, so an example whose answer is not shown
    // must still have succeeded.
    let script = format!(
        "curl() {{ command curl --write-out '%{{stderr}}HTTP %{{http_code}}\\n' \"$@\"; }}\n{command}"
    );
    let bin_dir = Path::new(binary()).parent().unwrap();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut shell = Command::new("bash");
    shell
        .args(["-c", &script])
        .current_dir(cwd)
        .env("PATH", path)
        .env("HOME", cwd)
        // The binary's default state directory is the real per-host one (root's is
        // /var/lib/uidgen): the README's commands keep theirs in the scratch directory.
        .env("UIDGEN_STATE_DIR", cwd)
        // A developer's machine, where the README's commands run: this test machine is a
        // container, whose zero-config store a start would otherwise refuse.
        .env("UIDGEN_WORKER_SINGLE_INSTANCE", "true")
        .env("NO_COLOR", "1")
        .env("UIDGEN_GRPC_LISTEN", "");
    match &started.token {
        Some(token) => shell.env("UIDGEN_ADMIN_TOKEN", token),
        None => shell.env_remove("UIDGEN_ADMIN_TOKEN"),
    };
    let out = shell
        .output()
        .map_err(|e| format!("cannot run bash: {e}"))?;
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    let statuses: Vec<&str> = stderr
        .lines()
        .filter_map(|l| l.strip_prefix("HTTP "))
        .collect();
    if step.expected.is_empty() {
        let failed = !out.status.success() || statuses.iter().any(|s| !s.starts_with('2'));
        return if failed {
            Err(format!(
                "shows no answer, so it must succeed; it gave {:?} {statuses:?}:\n{stdout}{stderr}",
                out.status
            ))
        } else {
            Ok(())
        };
    }
    if let Some(found) = matches(&step.expected, &block.varies, &stdout) {
        for (shown, actual) in found {
            if !given.iter().any(|(s, _)| *s == shown) {
                given.push((shown, actual));
            }
        }
        Ok(())
    } else {
        Err(format!(
            "the document shows\n{}\nthe server answered ({:?}, HTTP {statuses:?})\n{stdout}{}",
            step.expected.join("\n"),
            out.status,
            stderr
                .lines()
                .filter(|l| !l.starts_with("HTTP "))
                .collect::<Vec<_>>()
                .join("\n")
        ))
    }
}

#[test]
fn every_console_example_in_the_docs_gives_the_answer_it_shows() {
    let curl = Command::new("curl").arg("--version").output();
    assert!(
        curl.is_ok_and(|o| o.status.success()),
        "the doc examples run real curl, which is not on PATH: install it (Debian: apt-get install curl)"
    );
    let mut failures = Vec::new();
    let (mut ran, mut not_run) = (0, Vec::new());
    for document in DOCUMENTS {
        let text = std::fs::read_to_string(workspace().join(document)).unwrap();
        let blocks = console_blocks(&text).unwrap_or_else(|e| panic!("{document}: {e}"));
        let mut servers = Servers {
            started: HashMap::new(),
            redis_prefixes: Vec::new(),
        };
        let cwd = temp_dir("docs-cwd");
        for block in &blocks {
            if let Some(why) = &block.not_run {
                assert!(
                    !why.is_empty(),
                    "{document}:{}: `# not run:` without a reason",
                    block.line
                );
                not_run.push(format!("{document}:{}: {why}", block.line));
                continue;
            }
            let mut given = Vec::new();
            for step in &block.steps {
                let name = program(&step.command);
                if !PROGRAMS.contains(&name) {
                    failures.push(format!(
                        "{document}:{}: `{name}` cannot be run here (only {PROGRAMS:?}); run it \
                         another way, or say why not with `# not run: ...` before the block's \
                         first command",
                        step.line
                    ));
                    continue;
                }
                let started = servers.for_block(block, document.replace('/', "-").as_str());
                if let Err(why) = run(block, step, started, &cwd, &mut given) {
                    failures.push(format!(
                        "{document}:{}: $ {}\n{why}",
                        step.line, step.command
                    ));
                }
                ran += 1;
            }
        }
    }
    for line in &not_run {
        println!("not run: {line}");
    }
    assert!(
        failures.is_empty(),
        "{} doc examples differ from their server:\n\n{}",
        failures.len(),
        failures.join("\n\n")
    );
    assert!(ran >= 40, "only {ran} doc examples ran");
    assert!(
        not_run.len() <= 2,
        "more blocks skip than expected: {not_run:?}"
    );
}
