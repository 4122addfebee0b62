//! `uidgen decode` and `uidgen make`: IDs taken apart and built from their fields, on the
//! configured layout, another preset, or the sharded mode's IDs.

use anyhow::{Context, bail};
use clap::Args;
use uidgen_core::calendar::parse_epoch_ms;
use uidgen_core::{FieldKind, IdForm, UidParts, Zone};

use super::args::{ConfigArgs, LayoutArgs};
use crate::service::forms::FormName;
use crate::sharded::LAYOUT;

/// `uidgen decode`.
#[derive(Debug, Args)]
pub struct DecodeArgs {
    /// Configuration (for its layout).
    #[command(flatten)]
    pub config: ConfigArgs,
    /// Layout.
    #[command(flatten)]
    pub layout: LayoutArgs,
    /// Print Baidu's parseUID JSON instead of a line of text.
    #[arg(long)]
    pub json: bool,
    /// Show the encoded time in this zone: `UTC` (the default), an offset such as `+08:00`,
    /// or an IANA name such as `Asia/Shanghai`. The `TZ` variable is not read, so a script's
    /// output does not change with the host's zone: pass `--tz "$TZ"` to use it. The text
    /// names the zone (an offset and `[name]` after the time); `--json` adds Baidu's
    /// `timestamp` in the zone's local time and a `timeZone` key. Sharded IDs hold no time.
    // A western offset starts with `-`: taken as the value, not as an option.
    #[arg(long, value_name = "ZONE", allow_hyphen_values = true)]
    pub tz: Option<Zone>,
    /// How the IDs are written: `decimal` (the default), `base36` / `base62` as the HTTP
    /// API's `?form=` writes them (fixed width for the layout), or `masked`, unmasked with the
    /// configuration's `[mask]` keys (`UIDGEN_MASK_KEYS`). Sharded IDs are decimal only.
    #[arg(long, value_name = "FORM", default_value = "decimal")]
    pub form: FormName,
    /// The IDs. Options may come before, between or after them; a negative number is taken
    /// as an ID (and refused as one), not as an option.
    #[arg(required = true, allow_negative_numbers = true)]
    pub ids: Vec<String>,
}

/// `uidgen make`.
#[derive(Debug, Args)]
pub struct MakeArgs {
    /// Configuration (for its layout).
    #[command(flatten)]
    pub config: ConfigArgs,
    /// Layout.
    #[command(flatten)]
    pub layout: LayoutArgs,
    /// Wall-clock time: ISO-8601 (`2026-03-01T12:00:00Z`) or milliseconds since 1970.
    #[arg(long, conflicts_with = "units")]
    pub time: Option<String>,
    /// The raw time field (units since the layout's epoch).
    #[arg(long)]
    pub units: Option<u64>,
    /// Worker (machine) id.
    #[arg(long, required_unless_present = "index")]
    pub worker: Option<u64>,
    /// Sequence.
    #[arg(long, required_unless_present = "index")]
    pub seq: Option<u64>,
    /// Datacenter id, on a layout with a datacenter field (`layout.datacenter_bits`); the
    /// configured `layout.datacenter_id` when absent.
    #[arg(long, conflicts_with = "index")]
    pub datacenter: Option<u64>,
    /// `--layout sharded`: the app id (0 to 255).
    #[arg(long, requires = "index")]
    pub app: Option<u8>,
    /// `--layout sharded`: the shard (0 to 63).
    #[arg(long, requires = "index")]
    pub shard: Option<u8>,
    /// `--layout sharded`: the index (the number popped from the shard's list).
    #[arg(
        long,
        requires_all = ["app", "shard"],
        conflicts_with_all = ["worker", "seq", "time", "units"]
    )]
    pub index: Option<u64>,
}

/// `uidgen decode`: one line per ID (or JSON), failing on the first malformed one.
pub fn decode(args: &DecodeArgs) -> anyhow::Result<()> {
    if args.layout.layout.as_deref() == Some(LAYOUT) {
        if args.form != FormName::Plain(IdForm::Decimal) {
            bail!(
                "--form {} reads IDs of a layout; sharded IDs are decimal only",
                args.form
            );
        }
        return decode_sharded(&args.ids, args.json);
    }
    let settings = args.layout.settings(&args.config)?;
    let layout = &settings.layout;
    let form = args.form.with_keys(settings.mask.as_ref())?;
    // UTC unless `--tz` says otherwise (Baidu's parseUID used the JVM's zone, unnamed).
    let zone = args.tz.clone().unwrap_or_default();
    for text in &args.ids {
        // Decimal reads as it always has (with its messages); a radix form by its width, a
        // masked text with the key its id names.
        let d = if form.is_decimal() {
            layout.decode_str(text)?
        } else {
            form.read(layout, text)
                .with_context(|| format!("{text:?} as {}", args.form))?
        };
        if args.json {
            println!("{}", d.to_baidu_json_in(&zone));
        } else {
            // keyworker splits its worker into machine and process parts: show both.
            let parts = d.worker_parts.map_or_else(String::new, |p| {
                format!(" machine={} process={}", p.machine, p.process)
            });
            // Vesta's fields, on the layouts that have them only.
            let vesta: String = [FieldKind::Version, FieldKind::Type, FieldKind::Method]
                .into_iter()
                .filter(|&k| layout.has(k))
                .map(|k| format!(" {}={}", k.name(), d.parts.get(k)))
                .collect();
            let datacenter = d
                .datacenter
                .map_or_else(String::new, |dc| format!(" datacenter={dc}"));
            println!(
                "{} time={}{datacenter} worker={}{parts} sequence={}{vesta} layout={}",
                d.id,
                d.timestamp_in(&zone),
                d.parts.worker,
                d.parts.sequence,
                d.layout
            );
        }
    }
    Ok(())
}

/// `uidgen make`: print the ID with the given fields.
pub fn make(args: &MakeArgs) -> anyhow::Result<()> {
    let sharded = args.layout.layout.as_deref() == Some(LAYOUT);
    match (sharded, args.index) {
        (true, index) => return make_sharded(args.app, args.shard, index),
        (false, Some(_)) => {
            bail!("--app, --shard and --index make sharded IDs: add --layout sharded")
        }
        (false, None) => {}
    }
    let layout = args.layout.layout(&args.config)?;
    let time = match (&args.time, args.units) {
        (Some(t), None) => {
            let ms = parse_epoch_ms(t).with_context(|| format!("--time {t:?}"))?;
            layout.time_of(ms)?
        }
        (None, Some(units)) => units,
        _ => bail!("give --time (wall clock) or --units (raw time field)"),
    };
    let id = layout.compose(&UidParts {
        time,
        worker: args.worker.context("give --worker")?,
        sequence: args.seq.context("give --seq")?,
        datacenter: args.datacenter.unwrap_or_else(|| layout.datacenter_id()),
        ..layout.parts(0, 0, 0)
    })?;
    println!("{id}");
    Ok(())
}

/// `uidgen decode --layout sharded ID...`: app id, shard and index of each ID, one line each
/// (or JSON), failing on the first malformed one.
fn decode_sharded(ids: &[String], json: bool) -> anyhow::Result<()> {
    for text in ids {
        let parts = uidgen_sharded::ShardedId::decode_str(text)?;
        let id = parts.to_u64();
        if json {
            println!(
                "{}",
                serde_json::json!({
                    "id": id,
                    "layout": LAYOUT,
                    "app_id": parts.app_id,
                    "shard": parts.shard,
                    "index": parts.index,
                })
            );
        } else {
            println!(
                "{id} app_id={} shard={} index={} layout={LAYOUT}",
                parts.app_id, parts.shard, parts.index
            );
        }
    }
    Ok(())
}

/// `uidgen make --layout sharded --app A --shard S --index I`: print the ID.
fn make_sharded(app: Option<u8>, shard: Option<u8>, index: Option<u64>) -> anyhow::Result<()> {
    let (Some(app), Some(shard), Some(index)) = (app, shard, index) else {
        anyhow::bail!("--layout sharded makes an ID from --app, --shard and --index");
    };
    println!(
        "{}",
        uidgen_sharded::ShardedId::new(app, shard, index)?.to_u64()
    );
    Ok(())
}
