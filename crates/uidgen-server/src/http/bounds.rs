//! The real bounds of every parameter and body field, written into `/openapi.json`.
//!
//! A client generated from the document, or a fuzzer reading it (schemathesis runs in CI), must
//! not be able to build a request the document allows and the server refuses. Many bounds come
//! from this server's configuration (`batch_cap`, `segment.max_lease_size`) or its layout (a
//! field's width, the time range), which the routes' checked-in descriptions (`paths.json`)
//! cannot know, and the rest come from the store's limits ([`uidgen_core::MAX_TAG_LEN`], ...),
//! which the descriptions could only repeat as literals. So every bound lives here, one rule per
//! parameter or field name, read from the same constants the checks use, and is filled in when
//! the document is served. `tests/router/openapi.rs` holds every route to it: an integer without
//! both bounds, or a string that may be empty, fails the test, so a new route cannot slip through.

use serde_json::{Map, Value, json};
use uidgen_core::layout::PRESET_NAMES;
use uidgen_core::{Clock, FieldKind, IdForm, Layout, Zone};
use uidgen_segment::SegmentOptions;

use crate::config::spaces::{DEFAULT_SPACE, MAX_SPACE_NAME_LEN, SPACE_NAME_PATTERN};
use crate::service::callers::RouteFamily;
use crate::service::forms::FormName;
use crate::service::state::AppState;

/// What the bounds depend on: this server's configuration and layout.
struct Limits<'a> {
    batch_cap: u64,
    max_lease_size: u64,
    layout: &'a Layout,
    /// The worker ids this server leases to clients' fallbacks (`worker.fallback_range`).
    fallback_ids: (u64, u64),
    /// Now, by this server's clock, in ms since the Unix epoch.
    now_ms: u64,
    /// Whether the server has `[mask]` keys, so reads and writes the masked form.
    masked: bool,
}

/// Fill the bounds into `document` (the JSON of the generated OpenAPI document).
pub(super) fn describe(document: &mut Value, state: &AppState) {
    let max_lease_size = state
        .segments
        .as_ref()
        .map_or(SegmentOptions::default().max_lease_size, |s| {
            s.max_lease_size()
        });
    let layout = state.generator.layout();
    // Without a fallback range the routes answer 404 whatever the id: any worker id will do.
    let fallback_ids = state
        .fallback
        .as_ref()
        .and_then(|leases| leases.range().within(layout).ok())
        .map_or((0, layout.max_worker_id()), |range| {
            (range.low(), range.high())
        });
    let limits = Limits {
        batch_cap: u64::try_from(state.batch_cap).unwrap_or(u64::MAX),
        max_lease_size: u64::try_from(max_lease_size).unwrap_or(0),
        layout,
        fallback_ids,
        now_ms: uidgen_core::SystemClock.now_millis(),
        masked: state.masker.is_some(),
    };
    if let Some(paths) = document.get_mut("paths").and_then(Value::as_object_mut) {
        for operation in paths.values_mut().filter_map(Value::as_object_mut) {
            for op in operation.values_mut() {
                let id = op["operationId"].as_str().unwrap_or_default().to_owned();
                if let Some(params) = op.get_mut("parameters").and_then(Value::as_array_mut) {
                    params.retain_mut(|param| bound_parameter(&id, param, &limits));
                }
            }
        }
    }
    if let Some(schemas) = document
        .pointer_mut("/components/schemas")
        .and_then(Value::as_object_mut)
    {
        for (name, schema) in schemas.iter_mut() {
            bound_body(name, schema, &limits);
        }
    }
}

/// Replace the schema of a parameter of operation `operation` by its bounded one; `false`
/// drops the parameter (one this layout does not take).
fn bound_parameter(operation: &str, param: &mut Value, limits: &Limits) -> bool {
    let place = param["in"].as_str().unwrap_or_default();
    let name = param["name"].as_str().unwrap_or_default();
    let layout = limits.layout;
    let schema = match (place, name) {
        ("query", "count") => integer(1, limits.batch_cap),
        ("query", "size") => integer(1, limits.max_lease_size),
        ("query", "time") => integer(0, layout.max_time()),
        ("query", "seq") => integer(0, layout.max_sequence()),
        ("query", "machine") => integer(
            0,
            layout
                .worker_split()
                .map_or(layout.max_worker_id(), |s| s.max_machine()),
        ),
        // Only a layout that splits its worker field reads `process`; elsewhere the route
        // ignores it, so the document does not offer it.
        ("query", "process") => match layout.worker_split() {
            Some(split) => integer(0, split.max_process()),
            None => return false,
        },
        ("query", "genMethod") => integer(0, layout.max(FieldKind::Method)),
        ("query", "type") => integer(0, layout.max(FieldKind::Type)),
        ("query", "version") => integer(0, layout.max(FieldKind::Version)),
        ("query", "id") => integer(0, largest_id(layout)),
        // Leaf's decodeSnowflakeId reads any text, as Leaf's `String` parameter, and answers
        // `errorMsg` (200) for one that is not an ID; only an empty one is refused.
        ("query", "snowflakeId") => non_empty(),
        // Tinyid's routes: the biz type is a segment tag, `batchSize` its client's `Integer`
        // (cut to `batch_cap`, as Tinyid cuts to `batch.size.max`), `token` a caller token's
        // text.
        ("query", "bizType") => tag(),
        ("query", "batchSize") => integer(1, super::tinyid::MAX_BATCH_SIZE),
        ("query", "token") => non_empty(),
        ("query", "layout") => json!({ "type": "string", "enum": layout_names(layout) }),
        // Leaf's segment route calls its tag `key` (the path keeps Leaf's name, and with it the
        // metrics' route label); its snowflake route ignores the key.
        ("path", "key") if operation == "leaf_segment" => tag(),
        ("query", "gatePass" | "gate_pass") | ("path", "key") => non_empty(),
        // The decode route also decodes with a preset that has a sign bit: below 2^63 fits all.
        // Or a radix form (`form=`), which the route reads only when asked to: its text has a
        // letter, so it is never also a decimal.
        // A caller token's row id (`DELETE /v1/admin/tokens/{id}`).
        ("path", "id") if operation == "revoke_token" => integer(1, i64::MAX.unsigned_abs()),
        ("path", "id") => {
            let mut forms = vec![
                integer(0, i64::MAX.unsigned_abs()),
                json!({
                    "type": "string",
                    "minLength": 1,
                    "maxLength": IdForm::Base36.width(u64::MAX),
                    "pattern": "^[0-9A-Za-z]*[A-Za-z][0-9A-Za-z]*$",
                }),
            ];
            // A masked text (`uidgen_core::mask`): a key id, `_`, base62 digits.
            if limits.masked {
                forms.push(json!({
                    "type": "string",
                    "minLength": 3,
                    "maxLength": 5 + 1 + IdForm::Base62.width(u64::MAX),
                    "pattern": "^[0-9]{1,5}_[0-9A-Za-z]+$",
                }));
            }
            json!({ "oneOf": forms })
        }
        ("query", "form") => json!({ "type": "string", "enum": FormName::names(limits.masked) }),
        ("query", "tz") => zone(),
        // `uidgen_core::DatedForm::new`: absent is no prefix.
        ("query", "prefix") => json!({
            "type": "string",
            "minLength": 1,
            "maxLength": uidgen_core::forms::MAX_PREFIX_LEN,
            "pattern": "^[A-Za-z0-9_]+$",
        }),
        ("query", "digits") => integer(1, 20),
        // A dated number: prefix, YYYYMMDD, `-`, 1 to 20 digits (the form read decides which).
        ("path", "text") => json!({
            "type": "string",
            "minLength": 10,
            "maxLength": uidgen_core::forms::MAX_PREFIX_LEN + 8 + 1 + 20,
            "pattern": "^[A-Za-z0-9_]*[0-9]{8}-[0-9]{1,20}$",
        }),
        ("path", "tag") => tag(),
        // A name the configuration could give a space (or `default`); an unknown one is 404.
        ("path", "space") => json!({
            "type": "string",
            "minLength": 1,
            "maxLength": MAX_SPACE_NAME_LEN,
            "pattern": format!("^(?:{DEFAULT_SPACE}|{})$",
                SPACE_NAME_PATTERN.trim_start_matches('^').trim_end_matches('$')),
        }),
        ("path", "app_id") => integer(0, u8::MAX.into()),
        ("path", "worker_id") => integer(limits.fallback_ids.0, limits.fallback_ids.1),
        _ => return true,
    };
    param["schema"] = schema;
    true
}

/// Bound the fields of a request body's schema, keeping each field's description.
fn bound_body(name: &str, schema: &mut Value, limits: &Limits) {
    let layout = limits.layout;
    let Some(properties) = schema.get_mut("properties").and_then(Value::as_object_mut) else {
        return;
    };
    // Tinyid's answers hold `data: null` on failure; utoipa leaves a generic `Option` field
    // of these instances without its `null`.
    if name.starts_with("TinyidResponse")
        && let Some(data) = properties.get_mut("data")
    {
        let kind = data["type"].take();
        data["type"] = json!([kind, "null"]);
    }
    for (field, property) in properties.iter_mut() {
        let bound = match (name, field.as_str()) {
            ("TagUpdate", "step") => integer(1, max_i64(uidgen_store::MAX_STEP)),
            // `uidgen_store::validate_description`: no NUL, which PostgreSQL cannot store.
            ("TagUpdate" | "AppUpdate", "description") => json!({
                "type": ["string", "null"],
                "maxLength": uidgen_store::MAX_DESCRIPTION_LEN,
                "pattern": "^[^\\x00]*$",
            }),
            ("AppUpdate", "name") => app_name(),
            ("AppUpdate", "step") => nullable(integer(1, max_i64(uidgen_store::MAX_ID_ALLOC_STEP))),
            ("AppUpdate", "max_limit_id") => nullable(integer(0, i64::MAX.unsigned_abs())),
            ("MakeRequest", "time") => nullable(integer(0, layout.max_time())),
            ("MakeRequest", "timestamp") => nullable(timestamp(layout)),
            ("MakeRequest", "worker") => integer(0, layout.max_worker_id()),
            ("MakeRequest", "sequence") => integer(0, layout.max_sequence()),
            ("MakeRequest", "version") => integer(0, layout.max(FieldKind::Version)),
            ("MakeRequest", "type") => nullable(integer(0, layout.max(FieldKind::Type))),
            ("MakeRequest", "method") => integer(0, layout.max(FieldKind::Method)),
            ("MakeRequest", "datacenter") => {
                nullable(integer(0, layout.max(FieldKind::Datacenter)))
            }
            // `uidgen_store::FallbackLeases`: a holder name without control characters; the
            // holder string a claim returned has a `#`; a client issues only within its
            // lease, at most a lease's length past now (a bound that only grows).
            ("ClaimFallbackRequest", "holder") => {
                json!({ "pattern": format!("^[^{CONTROL}]*$") })
            }
            ("RenewFallbackRequest" | "ReleaseFallbackRequest", "holder") => {
                json!({ "pattern": r"^[\s\S]*#[\s\S]*$" })
            }
            ("RenewFallbackRequest" | "ReleaseFallbackRequest", "issued_until_ms") => {
                let reach = u64::try_from(uidgen_worker::MAX_LEASE_TTL.as_millis()).unwrap_or(0);
                integer(0, limits.now_ms.saturating_add(reach))
            }
            // `uidgen_store::validate_expiry`: an instant after now. The minimum is the
            // document's now, so it only ever errs on the side of a time already past.
            ("NewToken", "expires_ms") => {
                nullable(integer(limits.now_ms.saturating_add(1), max_i64(i64::MAX)))
            }
            // `check_scopes`: a route family or `*`; an app id or `*`.
            ("NewToken", "routes") => {
                let mut names: Vec<&str> = RouteFamily::ALL.iter().map(|f| f.name()).collect();
                names.push("*");
                json!({
                    "type": "array",
                    "maxItems": uidgen_store::MAX_SCOPE_ENTRIES,
                    "items": { "type": "string", "enum": names },
                })
            }
            ("NewToken", "apps") => json!({
                "type": "array",
                "maxItems": uidgen_store::MAX_SCOPE_ENTRIES,
                "items": {
                    "type": "string",
                    "pattern": "^(\\*|0|[1-9][0-9]?|1[0-9][0-9]|2[0-4][0-9]|25[0-5])$",
                },
            }),
            // `uidgen_store::TokenScopes::validate`: entries of 1 to 128 characters without
            // control characters, at most 256 of them.
            ("NewToken", "tags" | "spaces") => json!({
                "type": "array",
                "maxItems": uidgen_store::MAX_SCOPE_ENTRIES,
                "items": {
                    "type": "string",
                    "minLength": 1,
                    "maxLength": uidgen_store::MAX_SCOPE_ENTRY_LEN,
                    "pattern": format!("^[^{CONTROL}]*$"),
                },
            }),
            _ => continue,
        };
        merge(property, bound);
    }
    if name == "MakeRequest" {
        // `worker` and `sequence` are required; of `time` and `timestamp` exactly one is given
        // (a `null` counts as absent, as the route reads it).
        schema["required"] = json!(["worker", "sequence"]);
        schema["oneOf"] = json!([
            {
                "required": ["time"],
                "properties": { "time": { "type": "integer" }, "timestamp": { "type": "null" } }
            },
            {
                "required": ["timestamp"],
                "properties": {
                    "timestamp": { "type": ["integer", "string"] },
                    "time": { "type": "null" }
                }
            }
        ]);
    }
}

/// An integer from `min` to `max`.
fn integer(min: u64, max: u64) -> Value {
    let mut schema = json!({ "type": "integer", "minimum": min, "maximum": max });
    if i64::try_from(max).is_ok() {
        schema["format"] = json!("int64");
    }
    schema
}

/// `schema`, or `null` (which the route reads as absent).
fn nullable(mut schema: Value) -> Value {
    if let Some(choices) = schema.get_mut("oneOf").and_then(Value::as_array_mut) {
        choices.push(json!({ "type": "null" }));
    } else {
        let kind = schema["type"].take();
        schema["type"] = json!([kind, "null"]);
    }
    schema
}

fn max_i64(value: i64) -> u64 {
    value.unsigned_abs()
}

/// The largest ID `layout` decodes: below 2^63 with a sign bit, any 64-bit value without
/// (the Vesta layouts), below 2^width for a narrower layout (`safe_js`).
fn largest_id(layout: &Layout) -> u64 {
    layout.max_id()
}

/// The names the decode route takes as `layout=`: the served one, the presets, `sharded`.
fn layout_names(served: &Layout) -> Vec<String> {
    let mut names = vec![served.name().to_owned()];
    for preset in PRESET_NAMES {
        if preset != served.name() && Layout::preset(preset).is_ok() {
            names.push(preset.to_owned());
        }
    }
    names.push("sharded".to_owned());
    names
}

fn non_empty() -> Value {
    json!({ "type": "string", "minLength": 1 })
}

/// A zone as `uidgen_core::Zone::parse` reads it, described narrower than the route reads it
/// (as `timestamp` is): `UTC`, an IANA name of the database every host has (jiff's embedded
/// copy), or an offset `±HH:MM` / `±HHMM` / `±HH` within ±18:00. So every value the document
/// allows is one the route takes; case variants, a leading `:` and names only the host's
/// database knows are read too.
fn zone() -> Value {
    static ZONE: std::sync::OnceLock<Value> = std::sync::OnceLock::new();
    ZONE.get_or_init(|| {
        let mut names = vec!["UTC".to_owned()];
        names.extend(Zone::iana_names().into_iter().filter(|n| n != "UTC"));
        json!({ "oneOf": [
            { "type": "string", "enum": names },
            {
                "type": "string",
                "minLength": 3,
                "maxLength": 6,
                "pattern": "^[+-](?:(?:0[0-9]|1[0-7])(?::?[0-5][0-9])?|18(?::?00)?)$",
            },
        ]})
    })
    .clone()
}

/// Characters a stored name may not hold: control characters (Unicode `Cc`, as Rust's
/// `char::is_control`).
const CONTROL: &str = r"\x00-\x1f\x7f-\x9f";

/// Unicode `White_Space`, as Rust's `str::trim` reads it, spelled out: `\s` differs between
/// the regex dialects that read the document (ECMA-262's includes U+FEFF).
const SPACE: &str = r"\t-\r \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000";

/// A biz tag as `uidgen_store::validate_tag` takes it: the tag alphabet, 1 to 128 characters.
fn tag() -> Value {
    json!({
        "type": "string",
        "minLength": 1,
        "maxLength": uidgen_core::MAX_TAG_LEN,
        "pattern": uidgen_core::TAG_PATTERN,
    })
}

/// An app name as `AppSpec::validate` takes it: up to 128 characters, none a control
/// character, at least one not a space.
fn app_name() -> Value {
    json!({
        "type": "string",
        "minLength": 1,
        "maxLength": uidgen_store::MAX_APP_NAME_LEN,
        "pattern": format!("^[^{CONTROL}]*[^{SPACE}{CONTROL}][^{CONTROL}]*$"),
    })
}

/// `timestamp` of a make request: milliseconds since the Unix epoch, or ISO-8601 UTC text,
/// within the layout's time range (from its epoch to where its time bits run out).
///
/// The text form is described narrower than the route reads it (dates, offsets, days 29 to 31
/// are taken too): whole years inside the range and days 1 to 28, so that every text the
/// pattern allows is a time the route takes.
fn timestamp(layout: &Layout) -> Value {
    let first = layout.epoch_ms();
    let units = layout.max_time().saturating_add(1);
    let last = first
        .saturating_add(units.saturating_mul(layout.unit().millis()))
        .saturating_sub(1);
    let millis = integer(first, last);
    let year = |ms: u64| -> u32 {
        uidgen_core::calendar::format_iso8601(ms)
            .get(..4)
            .and_then(|y| y.parse().ok())
            .unwrap_or(9999)
    };
    // Whole years strictly inside the range, in the 4-digit years the pattern spells.
    let (from, to) = (year(first) + 1, year(last).min(10_000) - 1);
    if from > to {
        return millis;
    }
    let pattern = format!(
        "^{}-(?:0[1-9]|1[0-2])-(?:0[1-9]|1[0-9]|2[0-8])T(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\\.[0-9]{{3}})?Z$",
        digit_range(&format!("{from:04}"), &format!("{to:04}"))
    );
    let text = json!({ "type": "string", "pattern": pattern, "maxLength": "2026-01-01T00:00:00.000Z".len() });
    json!({ "oneOf": [millis, text] })
}

/// A regular expression matching exactly the decimal strings from `lo` to `hi`, both of the
/// same width: `digit_range("2026", "2033")` is `20(?:2[6-9]|3[0-3])`.
fn digit_range(lo: &str, hi: &str) -> String {
    debug_assert_eq!(lo.len(), hi.len(), "same width");
    if lo == hi {
        return lo.to_owned();
    }
    let (l, lo_rest) = lo.split_at(1);
    let (h, hi_rest) = hi.split_at(1);
    if lo_rest.is_empty() {
        return format!("[{l}-{h}]");
    }
    if l == h {
        return format!("{l}{}", digit_range(lo_rest, hi_rest));
    }
    // Three runs: `l` followed by lo_rest..=99, the digits between with anything after them,
    // and `h` followed by 00..=hi_rest; a run that is whole joins the middle one.
    let (zeros, nines) = ("0".repeat(lo_rest.len()), "9".repeat(lo_rest.len()));
    let (l_digit, h_digit) = (l.as_bytes()[0], h.as_bytes()[0]);
    let mut alternatives = Vec::new();
    let first_whole = if lo_rest == zeros {
        l_digit
    } else {
        l_digit + 1
    };
    let last_whole = if hi_rest == nines {
        h_digit
    } else {
        h_digit - 1
    };
    if lo_rest != zeros {
        alternatives.push(format!("{l}{}", digit_range(lo_rest, &nines)));
    }
    if first_whole <= last_whole {
        let (a, b) = (char::from(first_whole), char::from(last_whole));
        let digit = if a == b {
            a.to_string()
        } else {
            format!("[{a}-{b}]")
        };
        alternatives.push(format!("{digit}{}", "[0-9]".repeat(lo_rest.len())));
    }
    if hi_rest != nines {
        alternatives.push(format!("{h}{}", digit_range(&zeros, hi_rest)));
    }
    if alternatives.len() == 1 {
        alternatives.remove(0)
    } else {
        format!("(?:{})", alternatives.join("|"))
    }
}

/// Merge `bound`'s keys into `property` (a field's schema), replacing what it had.
fn merge(property: &mut Value, bound: Value) {
    if let (Value::Object(target), Value::Object(source)) = (property, bound) {
        // A bound in `oneOf` form replaces the field's own type.
        if source.contains_key("oneOf") {
            target.remove("type");
            target.remove("format");
        }
        let source: Map<String, Value> = source;
        target.extend(source);
    }
}

#[cfg(test)]
mod tests {
    use super::digit_range;

    /// Every number from 0000 to 9999 matches exactly when it lies in the range.
    #[test]
    fn digit_range_matches_exactly_its_range() {
        for (lo, hi) in [
            (2026, 2033),
            (2011, 2078),
            (2015, 2188),
            (1970, 2099),
            (2000, 2999),
            (2025, 2025),
            (1, 9998),
            (0, 9999),
        ] {
            let source = format!(
                "^(?:{})$",
                digit_range(&format!("{lo:04}"), &format!("{hi:04}"))
            );
            let regex = regex::Regex::new(&source).unwrap();
            for n in 0..10_000u32 {
                let text = format!("{n:04}");
                assert_eq!(
                    regex.is_match(&text),
                    (lo..=hi).contains(&n),
                    "{source} on {text}"
                );
            }
        }
    }
}
