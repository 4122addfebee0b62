//! `uidgen layout check --from A --to B`: whether moving a live ID space from layout A to
//! layout B can ever issue an ID A issued, and whether B's IDs sort above A's (issue 33, item
//! 3): [`Layout::succession`]'s proof, for any pair, with A's high mark given or read from the
//! store. Exit 0 only when both hold.
//!
//! A layout is written as the `[layout]` section takes it: a preset name (`baidu_legacy`),
//! a preset with its epoch (`leaf@2017-07-14`), or the section's keys
//! (`time_bits=30,worker_bits=20,seq_bits=13,epoch=2020-01-01`). [`LayoutConfig::build`] reads
//! it, so every rule and message is the configuration's.

use anyhow::{Context, anyhow, bail};
use clap::{ArgGroup, Args, Subcommand};
use uidgen_core::calendar::{format_iso8601, parse_epoch_ms};
use uidgen_core::layout::{HighMark, Succession};
use uidgen_core::{Clock, FieldKind, Layout, SystemClock};
use uidgen_store::{DEFAULT_SPACE, Store, StoreOptions};

use crate::config::layout::LayoutConfig;

/// `uidgen layout`.
#[derive(Debug, Args)]
pub struct LayoutCommandArgs {
    /// What to do.
    #[command(subcommand)]
    pub command: LayoutCommand,
}

/// `uidgen layout …`.
#[derive(Debug, Subcommand)]
pub enum LayoutCommand {
    /// Whether moving a live ID space from one layout to another can repeat an ID, and whether
    /// the new IDs sort above the old: exit 0 when it repeats none and keeps the order, 1
    /// otherwise or when it cannot be told.
    Check(CheckArgs),
}

/// `uidgen layout check`.
#[derive(Debug, Args)]
#[command(group(ArgGroup::new("high").required(true).args(["issued_until", "highest_id", "store"])))]
pub struct CheckArgs {
    /// The layout the space has issued with: a preset (`baidu_legacy`), a preset and its epoch
    /// (`leaf@2017-07-14`), or `[layout]` keys (`time_bits=30,worker_bits=20,seq_bits=13,epoch=2020-01-01`).
    #[arg(long, value_name = "LAYOUT")]
    pub from: String,
    /// The layout to move to, written as `--from`.
    #[arg(long, value_name = "LAYOUT")]
    pub to: String,
    /// Every ID of the space was stamped before this instant (ISO-8601 or ms since 1970): a
    /// generator's issued-until time, or when its servers stopped plus their borrowed lead.
    #[arg(long, value_name = "TIME")]
    pub issued_until: Option<String>,
    /// The highest ID the space issued (every ID it issued is at most this).
    #[arg(long, value_name = "ID")]
    pub highest_id: Option<u64>,
    /// Read the high mark from this store's `worker_lease` table: the latest of every lease's
    /// expiry and recorded issued-until time in `--space` (sound for the `leased` and `static`
    /// assigners on that store, which stamp nothing past either). The store is not migrated.
    #[arg(long, value_name = "URL")]
    pub store: Option<String>,
    /// The ID space whose leases `--store` reads.
    #[arg(long, default_value = DEFAULT_SPACE, requires = "store")]
    pub space: String,
    /// When the new layout starts issuing (ISO-8601 or ms since 1970; default: now). It
    /// starts at the time unit that holds this instant.
    #[arg(long, value_name = "TIME")]
    pub switch_at: Option<String>,
}

/// A layout written as `--from`/`--to` take it, built by the configuration's rules.
///
/// ```
/// use uidgen_server::cli::layout::parse_layout;
/// assert_eq!(parse_layout("baidu_continued")?.name(), "baidu_continued");
/// assert_eq!(parse_layout("leaf@1500000000000")?.epoch_ms(), 1_500_000_000_000);
/// let custom = parse_layout("time_bits=30,worker_bits=20,seq_bits=13,epoch=2020-01-01")?;
/// assert_eq!(custom.bits(uidgen_core::FieldKind::Time), 30);
/// assert!(parse_layout("nope").is_err());
/// # Ok::<(), anyhow::Error>(())
/// ```
pub fn parse_layout(spec: &str) -> anyhow::Result<Layout> {
    let spec = spec.trim();
    let config = if spec.contains('=') {
        let mut table = toml::Table::new();
        for pair in spec.split(',') {
            let (key, value) = pair
                .split_once('=')
                .ok_or_else(|| anyhow!("{pair:?} in {spec:?} is not key=value"))?;
            let (key, value) = (key.trim(), value.trim());
            let value = value.parse::<i64>().map_or_else(
                |_| toml::Value::String(value.to_owned()),
                toml::Value::Integer,
            );
            table.insert(key.to_owned(), value);
        }
        toml::Value::Table(table)
            .try_into::<LayoutConfig>()
            .with_context(|| format!("layout {spec:?}: keys of [layout] expected"))?
    } else {
        let (preset, epoch) = spec
            .split_once('@')
            .map_or((spec, None), |(p, e)| (p, Some(e.to_owned())));
        LayoutConfig {
            preset: preset.to_owned(),
            epoch,
            ..LayoutConfig::default()
        }
    };
    config.build().with_context(|| format!("layout {spec:?}"))
}

/// `uidgen layout …`.
pub async fn run(args: &LayoutCommandArgs) -> anyhow::Result<()> {
    match &args.command {
        LayoutCommand::Check(check) => {
            let report = check_report(check).await?;
            println!("{}", report.text);
            if report.safe {
                Ok(())
            } else {
                Err(anyhow!("{}", report.verdict))
            }
        }
    }
}

/// What `layout check` prints, and whether it exits 0.
#[derive(Debug)]
pub struct Report {
    /// The sentences, one a line.
    pub text: String,
    /// The last sentence, for the error line.
    pub verdict: String,
    /// Both proved: no ID repeats, every new ID sorts above.
    pub safe: bool,
}

/// The high mark and where it came from, in words.
struct Mark {
    high: HighMark,
    source: String,
    /// Why the mark may not be final (leases still held), if it may not.
    open: Option<String>,
}

/// Check `args`: read both layouts and the high mark, run the proof, say it in sentences.
pub async fn check_report(args: &CheckArgs) -> anyhow::Result<Report> {
    let from = parse_layout(&args.from).context("--from")?;
    let to = parse_layout(&args.to).context("--to")?;
    let now_ms = SystemClock.now_millis();
    let switch_ms = match &args.switch_at {
        Some(text) => parse_epoch_ms(text).with_context(|| format!("--switch-at {text:?}"))?,
        None => now_ms,
    };
    let mark = high_mark(args, &from, now_ms).await?;
    let check = from
        .succession(mark.high, &to, switch_ms)
        .with_context(|| {
            format!(
                "{} cannot issue from {}",
                to.name(),
                format_iso8601(switch_ms)
            )
        })?;
    Ok(explain((&from, &to), &mark, (switch_ms, now_ms), &check))
}

/// The high mark `args` give, or the one the store records.
async fn high_mark(args: &CheckArgs, from: &Layout, now_ms: u64) -> anyhow::Result<Mark> {
    if let Some(text) = &args.issued_until {
        let ms = parse_epoch_ms(text).with_context(|| format!("--issued-until {text:?}"))?;
        return Ok(Mark {
            high: HighMark::IssuedUntil(ms),
            source: format!(
                "every ID was stamped before {} (--issued-until)",
                format_iso8601(ms)
            ),
            open: None,
        });
    }
    if let Some(id) = args.highest_id {
        return Ok(Mark {
            high: HighMark::HighestId(id),
            source: format!("every ID issued is at most {id} (--highest-id)"),
            open: None,
        });
    }
    let url = args
        .store
        .as_deref()
        .ok_or_else(|| anyhow!("give --issued-until, --highest-id or --store"))?;
    store_mark(url, &args.space, from, now_ms).await
}

/// The latest instant the store's `worker_lease` rows of `space` let any holder stamp up to:
/// each row's expiry (a holder stamps only units that end by it) and its recorded
/// issued-until time, and for the default space the floors kept from before spaces.
async fn store_mark(url: &str, space: &str, from: &Layout, now_ms: u64) -> anyhow::Result<Mark> {
    let options = StoreOptions {
        max_connections: 1,
        migrate: false,
        ..StoreOptions::default()
    };
    let store = Store::connect_with(url, options)
        .await
        .context("cannot open the store")?;
    let rows = store
        .lease_rows(space, from.max_worker_id())
        .await
        .context("cannot read the worker leases")?;
    let mut until = rows
        .iter()
        .map(|row| row.expires_at_ms.max(row.last_issued_ms))
        .max();
    if space == DEFAULT_SPACE {
        let floors = store
            .lease_floors_before_spaces(0, from.max_worker_id())
            .await
            .context("cannot read the worker leases from before spaces")?;
        until = until.max(floors.into_values().max());
    }
    let Some(until) = until else {
        bail!(
            "the store records no worker lease in space {space}: it knows how far IDs were issued \
             only for the leased and static assigners; give --issued-until (when the space's \
             servers stopped, plus their borrowed lead) or --highest-id"
        );
    };
    let held = rows
        .iter()
        .filter(|row| !row.holder.is_empty() && row.expires_at_ms > now_ms)
        .count();
    Ok(Mark {
        high: HighMark::IssuedUntil(until),
        source: format!(
            "every ID was stamped before {} (the latest lease expiry or issued-until time of {} \
             worker id{} in space {space}, read from the store)",
            format_iso8601(until),
            rows.len(),
            if rows.len() == 1 { "" } else { "s" },
        ),
        open: (held > 0).then(|| {
            format!(
                "{held} worker id{} of space {space} {} still leased: {} may issue past this \
                 mark; stop them, then check again",
                if held == 1 { "" } else { "s" },
                if held == 1 { "is" } else { "are" },
                if held == 1 {
                    "its server"
                } else {
                    "their servers"
                },
            )
        }),
    })
}

/// A layout in one line: name, epoch, time field and when it runs out.
fn describe(layout: &Layout, now_ms: u64) -> String {
    let end = layout.runs_out_at_ms();
    format!(
        "{} (epoch {}, {} time bits of {} ms; {} {})",
        layout.name(),
        format_iso8601(layout.epoch_ms()),
        layout.bits(FieldKind::Time),
        layout.unit().millis(),
        if end <= now_ms { "ran out" } else { "runs out" },
        format_iso8601(end),
    )
}

/// An ID as `layout` reads it.
fn reading(layout: &Layout, id: u64) -> String {
    layout.decode(id).map_or_else(
        |e| e.to_string(),
        |d| {
            format!(
                "time {} worker {} sequence {}",
                d.timestamp_iso8601(),
                d.parts.worker,
                d.parts.sequence
            )
        },
    )
}

/// The check in sentences.
fn explain(
    (from, to): (&Layout, &Layout),
    mark: &Mark,
    (switch_ms, now_ms): (u64, u64),
    check: &Succession,
) -> Report {
    let (a, b) = (from.name(), to.name());
    let mut lines = vec![
        format!("from: {}", describe(from, now_ms)),
        format!("to:   {}", describe(to, now_ms)),
        format!("high mark: {}", mark.source),
        format!(
            "switch: {b} issues from {} on (the time unit holding it, {})",
            format_iso8601(to.millis_of(check.new_first_time).max(switch_ms)),
            check.new_first_time
        ),
    ];
    match check.old_largest {
        Some(old) => lines.push(format!("largest ID {a} can have issued: {old}")),
        None => lines.push(format!("{a} can have issued no ID before its high mark")),
    }
    lines.push(format!(
        "smallest ID {b} can issue from the switch on: {}",
        check.new_smallest
    ));
    lines.push(match check.common {
        None if check.sorts_above() => {
            format!(
                "never equal: yes, every ID {b} can issue is above every ID {a} can have issued"
            )
        }
        None => "never equal: yes, no 64-bit value fits both layouts' fields within these times"
            .to_owned(),
        Some(id) => format!(
            "never equal: NO, ID {id} can be issued by both ({a}: {}; {b}: {})",
            reading(from, id),
            reading(to, id)
        ),
    });
    lines.push(if check.sorts_above() {
        "sorts above: yes, as unsigned 64-bit numbers".to_owned()
    } else {
        format!("sorts above: NO, {b}'s smallest ID is not above {a}'s largest")
    });
    if !check.fits_signed() {
        lines.push(format!(
            "note: {b}'s IDs set bit 63, so a signed 64-bit reader (Java long, SQL BIGINT) sees \
             them negative, below the old ones: store and sort them unsigned"
        ));
    }
    let safe = check.is_safe() && mark.open.is_none();
    let verdict = if let Some(open) = &mark.open {
        format!("undecided: {open}")
    } else if check.is_safe() {
        format!("safe: moving from {a} to {b} repeats no ID and keeps the order")
    } else if check.never_equal() {
        format!("not safe: moving from {a} to {b} repeats no ID, but new IDs sort below old ones")
    } else {
        format!(
            "not safe: moving from {a} to {b} can repeat IDs; pick a layout or epoch whose IDs \
             begin above {}, or switch later",
            check.old_largest.unwrap_or(0)
        )
    };
    lines.push(verdict.clone());
    Report {
        text: lines.join("\n"),
        verdict,
        safe,
    }
}
