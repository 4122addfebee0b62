//! The console examples of a Markdown file, and how a shown answer is compared with a real one.
//!
//! The conventions (also written in docs/API.md, "Examples in these docs"):
//! - A ```` ```console ```` block holds commands (`$ ` lines; a line ending in `\` goes on in the
//!   next) and after each command the answer it gives. A command without a shown answer must
//!   succeed (curl: a 2xx status).
//! - `# server: NAME=VALUE ...` before the first command: the server the block talks to is
//!   started with these variables (`uidgen serve`, a fresh store); blocks of one file with the
//!   same variables talk to one server, in the order they appear.
//! - `# not run: why` before the first command: the block is not run, and says why.
//! - `# varies: VALUE ...` before the first command: example values that differ on every run (a
//!   random token, a time). In an answer each matches any value of letters and digits; a later
//!   command of the block that names it is run with the value the server gave.
//! - In an answer, `...` stands for any text, `<id>` for an ID and `<n>` for a number (any
//!   decimal integer, both) and `<timestamp>` for an ISO-8601 UTC time
//!   (`2026-11-22T19:11:15.000Z`): what depends on the clock. A line
//!   starting with two spaces continues the line before (a long one-line answer, wrapped).

/// One command and the answer the document shows for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    /// 1-based line of the `$ ` line.
    pub line: usize,
    /// The command, continuation lines included (as the shell reads them).
    pub command: String,
    /// The shown answer's lines; empty when none is shown.
    pub expected: Vec<String>,
}

/// One ```` ```console ```` block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Block {
    /// 1-based line of the opening fence.
    pub line: usize,
    /// The `# server:` variables, in order.
    pub server: Vec<(String, String)>,
    /// Why the block is not run, when it says so.
    pub not_run: Option<String>,
    /// The `# varies:` example values.
    pub varies: Vec<String>,
    /// Its commands.
    pub steps: Vec<Step>,
}

/// Every console block of `text`, or what is malformed (with its line).
pub fn console_blocks(text: &str) -> Result<Vec<Block>, String> {
    let mut blocks = Vec::new();
    let mut lines = text.lines().enumerate().map(|(i, l)| (i + 1, l));
    while let Some((line, l)) = lines.next() {
        let fence = l.trim_start();
        if !fence.starts_with("```") {
            continue;
        }
        let info = fence.trim_start_matches('`').trim();
        let mut block = Block {
            line,
            server: Vec::new(),
            not_run: None,
            varies: Vec::new(),
            steps: Vec::new(),
        };
        let mut closed = false;
        while let Some((n, l)) = lines.next() {
            if l.trim_start().starts_with("```") {
                closed = true;
                break;
            }
            if info != "console" {
                continue;
            }
            if let Some(command) = l.strip_prefix("$ ") {
                let mut command = command.to_owned();
                while command.ends_with('\\') {
                    let Some((_, next)) = lines.next() else { break };
                    command.push('\n');
                    command.push_str(next);
                }
                block.steps.push(Step {
                    line: n,
                    command,
                    expected: Vec::new(),
                });
            } else if let (Some(rest), true) = (l.strip_prefix("# "), block.steps.is_empty()) {
                if let Some(vars) = rest.strip_prefix("server:") {
                    for pair in vars.split_whitespace() {
                        let (name, value) = pair
                            .split_once('=')
                            .ok_or_else(|| format!("line {n}: `{pair}` is not NAME=VALUE"))?;
                        block.server.push((name.to_owned(), value.to_owned()));
                    }
                } else if let Some(values) = rest.strip_prefix("varies:") {
                    block
                        .varies
                        .extend(values.split_whitespace().map(str::to_owned));
                } else if let Some(why) = rest.strip_prefix("not run:") {
                    block.not_run = Some(why.trim().to_owned());
                }
            } else if let Some(step) = block.steps.last_mut() {
                step.expected.push(l.to_owned());
            } else if !l.trim().is_empty() {
                return Err(format!("line {n}: an answer before any `$ ` command"));
            }
        }
        if !closed {
            return Err(format!("line {line}: the code block is never closed"));
        }
        if info == "console" {
            if block.steps.is_empty() {
                return Err(format!(
                    "line {line}: a console block without a `$ ` command"
                ));
            }
            for step in &mut block.steps {
                while step.expected.last().is_some_and(|l| l.trim().is_empty()) {
                    step.expected.pop();
                }
            }
            blocks.push(block);
        }
    }
    Ok(blocks)
}

/// Whether `actual` (a command's output) is the answer `expected` shows.
pub fn answers(expected: &[String], actual: &str) -> bool {
    matches(expected, &[], actual).is_some()
}

/// Whether `actual` is the answer `expected` shows, each of `varies` standing for any value of
/// letters and digits: the values they stood for (`(shown, given)` pairs), or `None`.
pub fn matches(
    expected: &[String],
    varies: &[String],
    actual: &str,
) -> Option<Vec<(String, String)>> {
    let (regex, slots) = pattern(expected, varies);
    let found = regex.captures(actual.trim_end_matches('\n'))?;
    let mut given: Vec<(String, String)> = Vec::new();
    for (i, shown) in slots.iter().enumerate() {
        let got = found.get(i + 1)?.as_str().to_owned();
        match given.iter().find(|(s, _)| s == shown) {
            // One example value stands for one value throughout the answer.
            Some((_, before)) if *before != got => return None,
            Some(_) => {}
            None => given.push((shown.clone(), got)),
        }
    }
    Some(given)
}

/// The expected answer as a regular expression, its text literal and its placeholders not; and
/// the `varies` value each of its capture groups stands for.
pub fn pattern(expected: &[String], varies: &[String]) -> (regex::Regex, Vec<String>) {
    let mut joined: Vec<String> = Vec::new();
    for line in expected {
        match joined.last_mut() {
            Some(last) if line.starts_with("  ") => last.push_str(line.trim_start()),
            _ => joined.push(line.clone()),
        }
    }
    let text = joined.join("\n");
    let mut source = String::from("(?s)^");
    let mut slots = Vec::new();
    let mut rest = text.as_str();
    let fixed = ["...", "<id>", "<n>", "<timestamp>"];
    while !rest.is_empty() {
        // The earliest placeholder; of two at one place, the longer.
        let next = fixed
            .iter()
            .copied()
            .chain(varies.iter().map(String::as_str))
            .filter_map(|p| rest.find(p).map(|at| (at, std::cmp::Reverse(p.len()), p)))
            .min();
        let Some((at, _, placeholder)) = next else {
            source.push_str(&regex::escape(rest));
            break;
        };
        source.push_str(&regex::escape(&rest[..at]));
        source.push_str(match placeholder {
            "..." => ".*?",
            "<id>" | "<n>" => "[0-9]+",
            "<timestamp>" => r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{3}Z",
            varying => {
                slots.push(varying.to_owned());
                "([0-9A-Za-z]+)"
            }
        });
        rest = &rest[at + placeholder.len()..];
    }
    source.push('$');
    let regex = regex::Regex::new(&source).expect("an escaped pattern compiles");
    (regex, slots)
}

#[cfg(test)]
mod tests {
    use super::*;

    const DOC: &str = "text\n```console\n# server: UIDGEN_LAYOUT=snowflake A=b\n$ curl -s x \\\n    -d '{}'\n{\"a\":1,\n  \"b\":2}\n$ curl -s y\n\n```\n```rust\n$ not a command\n```\n```console\n# not run: no grpcurl here\n$ grpcurl x\n```\n";

    #[test]
    fn blocks_commands_answers_and_their_settings_are_read() {
        let blocks = console_blocks(DOC).unwrap();
        assert_eq!(blocks.len(), 2);
        assert_eq!(blocks[0].line, 2);
        assert_eq!(
            blocks[0].server,
            [
                ("UIDGEN_LAYOUT".into(), "snowflake".into()),
                ("A".into(), "b".into())
            ]
        );
        assert_eq!(blocks[0].steps[0].command, "curl -s x \\\n    -d '{}'");
        assert_eq!(blocks[0].steps[0].expected, ["{\"a\":1,", "  \"b\":2}"]);
        assert_eq!(
            (blocks[0].steps[1].line, blocks[0].steps[1].expected.len()),
            (8, 0)
        );
        assert_eq!(blocks[1].not_run.as_deref(), Some("no grpcurl here"));
    }

    #[test]
    fn malformed_blocks_are_refused() {
        assert!(console_blocks("```console\nanswer\n$ curl x\n```\n").is_err());
        assert!(console_blocks("```console\n# just a comment\n```\n").is_err());
        assert!(console_blocks("```console\n$ curl x\n").is_err());
    }

    #[test]
    fn placeholders_stand_for_what_the_clock_changes_and_nothing_else() {
        let shown = |s: &str| s.lines().map(str::to_owned).collect::<Vec<_>>();
        assert!(answers(
            &shown("{\"ids\":[<id>,<id>]}"),
            "{\"ids\":[12,13]}\n"
        ));
        assert!(!answers(
            &shown("{\"ids\":[<id>,<id>]}"),
            "{\"ids\":[12,x]}"
        ));
        assert!(answers(
            &shown("{\"id\":1,...}"),
            "{\"id\":1,\"layout\":\"baidu\"}"
        ));
        assert!(!answers(&shown("{\"id\":1,...}"), "{\"id\":12}"));
        assert!(answers(
            &shown("at <timestamp>"),
            "at 2026-11-22T19:11:15.000Z"
        ));
        assert!(!answers(&shown("at <timestamp>"), "at 2026-11-22"));
        assert!(answers(
            &shown("{\"a\":1,\n  \"b\":2}"),
            "{\"a\":1,\"b\":2}"
        ));
        assert!(!answers(&shown("a.c"), "abc"), "text is literal");
        assert!(answers(&shown("one\ntwo"), "one\ntwo\n"));
    }

    #[test]
    fn varying_values_match_any_token_and_say_what_they_stood_for() {
        let shown = vec![r#"{"holder":"a#f00d","until":17,"again":"f00d"}"#.to_owned()];
        let varies = ["f00d".to_owned(), "17".to_owned()];
        let actual = r#"{"holder":"a#b33f","until":99,"again":"b33f"}"#;
        let given = matches(&shown, &varies, actual).unwrap();
        assert_eq!(
            given,
            [("f00d".into(), "b33f".into()), ("17".into(), "99".into())]
        );
        // One example value is one value: two different ones do not match it.
        let two = r#"{"holder":"a#b33f","until":99,"again":"c0de"}"#;
        assert_eq!(matches(&shown, &varies, two), None);
        let blocks = console_blocks("```console\n# varies: f00d 17\n$ curl x\n```\n").unwrap();
        assert_eq!(blocks[0].varies, ["f00d", "17"]);
    }
}
