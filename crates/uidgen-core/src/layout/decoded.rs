//! An ID taken apart, and the ways it is shown: ISO-8601 text and Baidu's `parseUID` JSON, in
//! UTC or a chosen [`Zone`].

use super::split::WorkerParts;
use crate::calendar;
use crate::fields::UidParts;
use crate::zone::Zone;

/// An ID taken apart, with the wall-clock time it encodes (Vesta's "explain", Baidu's `parseUID`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodedUid {
    /// The ID.
    pub id: u64,
    /// Its fields.
    pub parts: UidParts,
    /// The wall-clock time it encodes, in milliseconds since the Unix epoch.
    pub timestamp_ms: u64,
    /// The name of the layout that decoded it.
    pub layout: String,
    /// The worker's machine and process parts, for a layout that splits its worker field
    /// (`keyworker`); `None` for every other layout.
    pub worker_parts: Option<WorkerParts>,
    /// The datacenter id (equal to `parts.datacenter`), for a layout with a datacenter field;
    /// `None` for every other layout.
    pub datacenter: Option<u64>,
}

impl DecodedUid {
    /// The encoded time as ISO-8601 UTC, e.g. `2026-01-01T00:00:05.000Z`.
    pub fn timestamp_iso8601(&self) -> String {
        calendar::format_iso8601(self.timestamp_ms)
    }

    /// The encoded time as ISO-8601 in `zone`, with its offset and, for an IANA zone, its name:
    /// `2016-05-20T08:00:03.000+08:00[Asia/Shanghai]`. UTC gives
    /// [`timestamp_iso8601`](Self::timestamp_iso8601)'s text.
    ///
    /// ```
    /// use uidgen_core::{Layout, Zone};
    /// let layout = Layout::baidu("2016-05-20")?;
    /// let decoded = layout.decode(layout.compose(&layout.parts(3, 2, 1))?)?;
    /// assert_eq!(decoded.timestamp_in(&Zone::utc()), decoded.timestamp_iso8601());
    /// assert_eq!(decoded.timestamp_in(&Zone::parse("+08:00")?), "2016-05-20T08:00:03.000+08:00");
    /// # Ok::<(), uidgen_core::UidError>(())
    /// ```
    pub fn timestamp_in(&self, zone: &Zone) -> String {
        zone.format_iso8601(self.timestamp_ms)
    }

    /// Baidu's `parseUID` JSON shape with the timestamp in UTC:
    /// [`to_baidu_json_in`](Self::to_baidu_json_in) with [`Zone::utc`].
    ///
    /// ```
    /// use uidgen_core::{Layout, UidParts};
    /// let layout = Layout::baidu("2016-05-20").unwrap();
    /// let id = layout
    ///     .compose(&UidParts { time: 3, worker: 2, sequence: 1, ..Default::default() })
    ///     .unwrap();
    /// assert_eq!(
    ///     layout.decode(id).unwrap().to_baidu_json(),
    ///     format!(
    ///         "{{\"UID\":\"{id}\",\"timestamp\":\"2016-05-20 00:00:03\",\"timeZone\":\"UTC\",\
    ///          \"workerId\":\"2\",\"sequence\":\"1\"}}"
    ///     )
    /// );
    /// ```
    pub fn to_baidu_json(&self) -> String {
        self.to_baidu_json_in(&Zone::utc())
    }

    /// Baidu's `parseUID` JSON shape (`UID`, `timestamp`, `workerId`, `sequence`, every value a
    /// string), with the timestamp as Baidu writes it, `yyyy-MM-dd HH:mm:ss`, in `zone`'s local
    /// time. Baidu printed the JVM's local time and did not say which zone that was; this names
    /// it in a `timeZone` key after `timestamp` (Baidu's readers skip keys they do not know).
    ///
    /// ```
    /// use uidgen_core::{Layout, Zone};
    /// let layout = Layout::baidu_legacy()?; // 2016-05-20T00:00:00+08:00
    /// let decoded = layout.decode(layout.compose(&layout.parts(3, 2, 1))?)?;
    /// let json = decoded.to_baidu_json_in(&Zone::parse("Asia/Shanghai")?);
    /// assert!(json.contains(r#""timestamp":"2016-05-20 00:00:03","timeZone":"Asia/Shanghai""#));
    /// # Ok::<(), uidgen_core::UidError>(())
    /// ```
    ///
    /// A `keyworker` ID also names its worker's parts, `machineId` and `processId`, after
    /// `workerId`, and a layout with a datacenter field names it, `datacenterId`, before:
    ///
    /// ```
    /// use uidgen_core::Layout;
    /// let layout = Layout::keyworker()?;
    /// let id = layout.compose(&layout.parts(0, (3 << 5) | 17, 0))?;
    /// let json = layout.decode(id)?.to_baidu_json();
    /// let fields = r#""workerId":"113","machineId":"3","processId":"17","sequence":"0""#;
    /// assert!(json.contains(fields));
    /// let twitter = Layout::snowflake()?.with_datacenter_bits(5)?.with_datacenter_id(2)?;
    /// let json = twitter.decode(twitter.compose(&twitter.parts(0, 9, 0))?)?.to_baidu_json();
    /// assert!(json.contains(r#""datacenterId":"2","workerId":"9""#));
    /// # Ok::<(), uidgen_core::UidError>(())
    /// ```
    pub fn to_baidu_json_in(&self, zone: &Zone) -> String {
        // Every value is a number, a fixed-format date or a zone name (ASCII letters, digits,
        // `/`, `_`, `+`, `-`, `:`), so nothing needs escaping.
        let datacenter = self
            .datacenter
            .map_or_else(String::new, |dc| format!(r#""datacenterId":"{dc}","#));
        let parts = self.worker_parts.map_or_else(String::new, |p| {
            format!(
                r#","machineId":"{}","processId":"{}""#,
                p.machine, p.process
            )
        });
        format!(
            r#"{{"UID":"{}","timestamp":"{}","timeZone":"{}",{datacenter}"workerId":"{}"{parts},"sequence":"{}"}}"#,
            self.id,
            zone.format_baidu(self.timestamp_ms),
            zone.name(),
            self.parts.worker,
            self.parts.sequence
        )
    }
}
