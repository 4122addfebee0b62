//! `uidgen decode` and `uidgen make`: IDs taken apart and built from their fields, on the
//! configured layout, another preset, or the sharded mode's IDs.

use anyhow::{Context, bail};
use uidgen_core::calendar::parse_epoch_ms;
use uidgen_core::{FieldKind, IdForm, UidParts};

use super::{DecodeArgs, MakeArgs};
use crate::service::forms::FormName;
use crate::sharded::LAYOUT;

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
