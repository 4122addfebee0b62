//! What every peer's assessment is made of: the [`Report`] printed and recorded, the layout
//! [`Shape`]s decisions keep, worker ids read and shown as ranges. Below the peers' modules and
//! the command that runs them, so that neither imports from the other.

use serde::{Deserialize, Serialize};
use uidgen_core::{Clock, Layout, SystemClock, TimeUnit};

/// What a takeover found and will do: printed by `--check` and recorded with the decision.
#[derive(Debug, Default)]
pub struct Report {
    /// What the peer left: its rows, nodes, keys.
    pub found: Vec<String>,
    /// What uidgen continues from.
    pub continues: Vec<String>,
    /// Why no ID can repeat, and where the new IDs sort.
    pub why: Vec<String>,
    /// What the configuration or the peer's state must change first; the takeover is refused
    /// while any is left.
    pub refused: Vec<String>,
}

impl std::fmt::Display for Report {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let sections = [
            ("found", &self.found),
            ("uidgen continues", &self.continues),
            ("why no ID repeats", &self.why),
            ("refused", &self.refused),
        ];
        for (title, lines) in sections {
            if lines.is_empty() {
                continue;
            }
            writeln!(f, "{title}:")?;
            for line in lines {
                writeln!(f, "- {line}")?;
            }
        }
        Ok(())
    }
}

/// A peer's assessment: the report, and the decision to record when nothing is refused (the
/// peer's own decision type; [`Decision`](super::Decision) once the command wraps it).
#[derive(Debug)]
pub struct Assessment<D> {
    /// What was found and will be done.
    pub report: Report,
    /// What to record.
    pub decision: D,
}

impl<D> Assessment<D> {
    /// The same assessment with its decision turned by `wrap` (a peer's decision into the
    /// [`Decision`](super::Decision) every peer's is recorded as).
    pub fn map<E>(self, wrap: impl FnOnce(D) -> E) -> Assessment<E> {
        Assessment {
            report: self.report,
            decision: wrap(self.decision),
        }
    }
}

/// A layout's shape: its fields, unit and epoch, as a decision keeps it and a message shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shape {
    /// The preset's name.
    pub name: String,
    /// The fields from the top, `kind:bits`.
    pub fields: String,
    /// The time unit.
    pub unit: String,
    /// The epoch, ms since the Unix epoch.
    pub epoch_ms: u64,
}

impl Shape {
    /// The shape of `layout`.
    pub fn of(layout: &Layout) -> Self {
        let fields = layout
            .fields()
            .iter()
            .map(|(kind, bits)| format!("{kind:?}:{bits}").to_lowercase())
            .collect::<Vec<_>>()
            .join("/");
        let unit = match layout.unit() {
            TimeUnit::Seconds => "seconds",
            TimeUnit::TenMillis => "10 ms",
            TimeUnit::Millis => "ms",
        };
        Self {
            name: layout.name().to_owned(),
            fields,
            unit: unit.to_owned(),
            epoch_ms: layout.epoch_ms(),
        }
    }

    /// Whether `layout` stamps IDs of this shape (the same fields, unit and epoch).
    pub fn holds(&self, layout: &Layout) -> bool {
        let other = Self::of(layout);
        (other.fields.as_str(), other.unit.as_str(), other.epoch_ms)
            == (self.fields.as_str(), self.unit.as_str(), self.epoch_ms)
    }
}

impl std::fmt::Display for Shape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} ({} in {}, epoch {})",
            self.name,
            self.fields,
            self.unit,
            uidgen_core::calendar::format_iso8601(self.epoch_ms)
        )
    }
}

/// An assigner as the configuration names it (`worker.assigner`).
pub(crate) fn assigner_name(kind: crate::config::worker::AssignerKind) -> String {
    format!("{kind:?}").to_lowercase()
}

/// The wall clock, as the decisions compare it with the peers' epochs.
pub(crate) fn now_ms() -> u64 {
    SystemClock.now_millis()
}

/// `1021-1023,7`: worker ids, one by one or as inclusive ranges.
///
/// ```
/// use uidgen_server::cli::takeover::parse_ids;
/// assert_eq!(parse_ids("1021-1023,7"), Ok(vec![7, 1021, 1022, 1023]));
/// assert!(parse_ids("7-").is_err());
/// ```
pub fn parse_ids(text: &str) -> Result<Vec<u64>, String> {
    let mut ids = Vec::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let bad = || format!("{part:?} is not a worker id or a range like 1021-1023");
        let (low, high) = match part.split_once('-') {
            Some((low, high)) => (low.trim(), high.trim()),
            None => (part, part),
        };
        let (low, high): (u64, u64) = (
            low.parse().map_err(|_| bad())?,
            high.parse().map_err(|_| bad())?,
        );
        if low > high || high - low > 1 << 22 {
            return Err(bad());
        }
        ids.extend(low..=high);
    }
    ids.sort_unstable();
    ids.dedup();
    Ok(ids)
}

/// `ids` as short ranges: `7, 1021-1023`.
pub fn show_ids(ids: &[u64]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut run: Option<(u64, u64)> = None;
    for &id in ids {
        run = match run {
            Some((low, high)) if id == high + 1 => Some((low, id)),
            Some((low, high)) => {
                parts.push(span(low, high));
                Some((id, id))
            }
            None => Some((id, id)),
        };
    }
    if let Some((low, high)) = run {
        parts.push(span(low, high));
    }
    parts.join(", ")
}

fn span(low: u64, high: u64) -> String {
    if low == high {
        low.to_string()
    } else {
        format!("{low}-{high}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_read_and_show_as_ranges() {
        let ids = parse_ids(" 7, 1021-1023 ,9,8").unwrap();
        assert_eq!(ids, [7, 8, 9, 1021, 1022, 1023]);
        assert_eq!(show_ids(&ids), "7-9, 1021-1023");
        assert!(parse_ids("9-1").is_err());
        assert!(parse_ids("x").is_err());
    }

    #[test]
    fn a_shape_is_fields_unit_and_epoch() {
        let baidu = Layout::baidu_legacy().unwrap();
        let shape = Shape::of(&baidu);
        assert_eq!(shape.fields, "sign:1/time:28/worker:22/sequence:13");
        assert!(shape.holds(&Layout::baidu(uidgen_core::layout::BAIDU_LEGACY_EPOCH_MS).unwrap()));
        assert!(
            !shape.holds(&Layout::baidu_default().unwrap()),
            "another epoch"
        );
        assert!(
            !shape.holds(&Layout::baidu_continued().unwrap()),
            "29 time bits"
        );
    }
}
