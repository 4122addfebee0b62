//! Ways to derive one layout from another: a new epoch or name, a worker field read as parts
//! or cut for a datacenter, the values generators stamp, Leaf's random sequence start, and a
//! continuation past an exhausted time field.

use super::split::{PartOrder, WorkerSplit};
use super::types::{IntoEpoch, Layout, check_epoch};
use crate::error::{Result, UidError};
use crate::fields::FieldKind::{Datacenter, Method, Sign, Time, Type, Version, Worker};
use crate::fields::UidParts;

impl Layout {
    /// The same layout counting time from another epoch, checked as [`Layout::new`] checks it
    /// (not in the future). A Leaf or Snowflake deployment that set its own `twepoch` keeps
    /// its ID space this way.
    ///
    /// ```
    /// use uidgen_core::{Layout, UidError};
    /// let twepoch = 1_500_000_000_000; // 2017-07-14, a Leaf user's own
    /// let leaf = Layout::leaf()?.with_epoch(twepoch)?;
    /// assert_eq!((leaf.name(), leaf.epoch_ms()), ("leaf", twepoch));
    /// assert_eq!(leaf.fields(), Layout::leaf()?.fields());
    /// assert!(matches!(
    ///     Layout::leaf()?.with_epoch("2999-01-01"),
    ///     Err(UidError::EpochInFuture { .. })
    /// ));
    /// # Ok::<(), UidError>(())
    /// ```
    pub fn with_epoch(mut self, epoch: impl IntoEpoch) -> Result<Self> {
        let epoch_ms = epoch.into_epoch_ms()?;
        check_epoch(epoch_ms)?;
        self.epoch_ms = epoch_ms;
        Ok(self)
    }

    /// Read the worker field as a machine part above a `process_bits`-wide process part (see
    /// [`WorkerSplit`]). Both parts need at least one bit. The split changes no bit of any ID:
    /// the worker number is the field's value.
    ///
    /// ```
    /// use uidgen_core::Layout;
    /// let layout = Layout::snowflake()?.with_worker_split(4)?;
    /// let id = layout.compose(&layout.parts(1, (9 << 4) | 2, 0))?;
    /// assert_eq!(id, Layout::snowflake()?.compose(&layout.parts(1, (9 << 4) | 2, 0))?);
    /// let parts = layout.decode(id)?.worker_parts.expect("split");
    /// assert_eq!((parts.machine, parts.process), (9, 2));
    /// # Ok::<(), uidgen_core::UidError>(())
    /// ```
    pub fn with_worker_split(self, process_bits: u32) -> Result<Self> {
        self.with_worker_split_order(process_bits, PartOrder::MachineHigh)
    }

    /// Read the worker field as machine and process parts placed in `order`:
    /// [`PartOrder::ProcessHigh`] puts the process part above the machine part, as the
    /// `keyworker` write-up's code does. Generators and assigners still deal in worker numbers
    /// (`machine << process_bits | process`); composing places the parts, decoding reads them
    /// back.
    ///
    /// ```
    /// use uidgen_core::Layout;
    /// use uidgen_core::layout::PartOrder;
    /// let layout = Layout::snowflake()?.with_worker_split_order(5, PartOrder::ProcessHigh)?;
    /// let worker = (3 << 5) | 17; // machine 3, process 17
    /// let id = layout.compose(&layout.parts(0, worker, 0))?;
    /// assert_eq!(id >> 12, (17 << 5) | 3, "the process part sits above the machine part");
    /// assert_eq!(layout.decode(id)?.parts.worker, worker);
    /// # Ok::<(), uidgen_core::UidError>(())
    /// ```
    pub fn with_worker_split_order(mut self, process_bits: u32, order: PartOrder) -> Result<Self> {
        self.worker_split = Some(WorkerSplit::new(self.bits(Worker), process_bits, order)?);
        Ok(self)
    }

    /// Cut the top `bits` of the worker field off as a datacenter field: Twitter's Snowflake
    /// split its 10 worker bits 5 + 5, Baidu's issue tracker asks for 5 + 17 of its 22. Every ID
    /// keeps its bit positions; the worker id now ranges over the lower bits only, and
    /// generators stamp the datacenter id set by [`with_datacenter_id`](Self::with_datacenter_id)
    /// (0 until then).
    ///
    /// A builder rather than presets (`snowflake_dc`, `baidu_dc`, ...) because the cut applies
    /// to every layout alike, and a deployment picks both its preset and its datacenter width.
    /// The worker keeps at least one bit; cut before any worker split.
    ///
    /// ```
    /// use uidgen_core::{FieldKind, Layout};
    /// // Twitter's Snowflake: 41 bits of ms, 5 datacenter bits, 5 worker bits, 12 of sequence.
    /// let twitter = Layout::snowflake()?.with_datacenter_bits(5)?.with_datacenter_id(3)?;
    /// assert_eq!((twitter.bits(FieldKind::Datacenter), twitter.max_worker_id()), (5, 31));
    /// let id = twitter.compose(&twitter.parts(1_000, 7, 9))?;
    /// let decoded = twitter.decode(id)?;
    /// assert_eq!((decoded.datacenter, decoded.parts.worker), (Some(3), 7));
    /// // The same bits as Snowflake's 10-bit worker 3 << 5 | 7.
    /// let plain = Layout::snowflake()?;
    /// assert_eq!(id, plain.compose(&plain.parts(1_000, (3 << 5) | 7, 9))?);
    /// # Ok::<(), uidgen_core::UidError>(())
    /// ```
    pub fn with_datacenter_bits(self, bits: u32) -> Result<Self> {
        let worker = self.bits(Worker);
        let refuse = |reason| {
            Err(UidError::InvalidFieldWidth {
                field: Datacenter,
                bits,
                reason,
            })
        };
        if self.slots[Datacenter.index()].is_some() {
            return refuse("the layout already has a datacenter field");
        }
        if bits == 0 || bits >= worker {
            return refuse(
                "a datacenter field takes 1 bit or more off the worker field's top and leaves the worker at least one",
            );
        }
        if self.worker_split.is_some() {
            return refuse("cut the datacenter field before splitting the worker field");
        }
        let mut fields = Vec::with_capacity(self.fields.len() + 1);
        for &(kind, width) in &self.fields {
            if kind == Worker {
                fields.push((Datacenter, bits));
                fields.push((Worker, width - bits));
            } else {
                fields.push((kind, width));
            }
        }
        Ok(Self::new(self.name.clone(), &fields, self.unit, self.epoch_ms)?.with_state_of(&self))
    }

    /// Stamp `datacenter` into every ID generators make with this layout (and into
    /// [`parts`](Self::parts)). The layout needs a datacenter field wide enough.
    ///
    /// ```
    /// use uidgen_core::{FieldKind, Layout, UidError};
    /// let baidu = Layout::baidu_default()?.with_datacenter_bits(5)?;
    /// assert_eq!((baidu.bits(FieldKind::Datacenter), baidu.bits(FieldKind::Worker)), (5, 17));
    /// assert_eq!(baidu.clone().with_datacenter_id(31)?.datacenter_id(), 31);
    /// assert!(matches!(
    ///     baidu.with_datacenter_id(32),
    ///     Err(UidError::FieldOverflow { field: FieldKind::Datacenter, .. })
    /// ));
    /// assert!(Layout::snowflake()?.with_datacenter_id(1).is_err(), "no datacenter field");
    /// # Ok::<(), UidError>(())
    /// ```
    pub fn with_datacenter_id(mut self, datacenter: u64) -> Result<Self> {
        if self.slots[Datacenter.index()].is_none() {
            return Err(UidError::InvalidOption {
                name: "datacenter",
                reason: format!(
                    "layout {} has no datacenter field; cut one with a datacenter width first",
                    self.name
                ),
            });
        }
        self.compose(&UidParts {
            datacenter,
            ..UidParts::default()
        })?;
        self.defaults.datacenter = datacenter;
        Ok(self)
    }

    /// Rename the layout (the name shows in decoded IDs).
    pub fn named(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// Set the values generators put in the Vesta fields (version, type, method).
    pub fn with_defaults(mut self, version: u64, kind: u64, method: u64) -> Result<Self> {
        let parts = UidParts {
            version,
            kind,
            method,
            ..UidParts::default()
        };
        self.compose(&parts)?;
        self.defaults = UidParts {
            datacenter: self.defaults.datacenter,
            ..parts
        };
        Ok(self)
    }

    /// Start each new time unit at a random sequence below `bound` in the sequencing
    /// generators ([`DefaultUidGenerator`](crate::DefaultUidGenerator),
    /// [`SnowflakeGenerator`](crate::SnowflakeGenerator)); 0 or 1 starts at 0. Leaf always
    /// does this with 100, so that at low traffic IDs are not all multiples of the sequence
    /// width, which skews `id % shards`; the `leaf` preset carries it. The cached generator
    /// pads whole units and ignores it.
    ///
    /// The bound is at most `max_sequence + 1`: a unit's first ID must fit.
    ///
    /// ```
    /// use uidgen_core::{Layout, UidError};
    /// assert_eq!(Layout::leaf()?.random_start_bound(), 100);
    /// assert_eq!(Layout::snowflake()?.random_start_bound(), 0);
    /// assert_eq!(Layout::snowflake()?.with_random_start(100)?.named("leaf"), Layout::leaf()?);
    /// assert!(matches!(
    ///     Layout::snowflake()?.with_random_start(4097),
    ///     Err(UidError::InvalidOption { name: "random_start", .. })
    /// ));
    /// # Ok::<(), UidError>(())
    /// ```
    pub fn with_random_start(mut self, bound: u64) -> Result<Self> {
        let units = self.max_sequence() + 1;
        if bound > units {
            return Err(UidError::InvalidOption {
                name: "random_start",
                reason: format!(
                    "{bound} exceeds the {units} sequence values of a time unit; use 0 to {units}"
                ),
            });
        }
        self.random_start_bound = bound;
        Ok(self)
    }

    /// The layout that continues this one once its time field has run out: the sign bit
    /// becomes the time field's new top bit, and generators start at the first time value the
    /// old field could not hold. Same epoch, unit and field positions, so:
    ///
    /// - every ID of this layout decodes unchanged under the continuation (time, worker,
    ///   sequence and timestamp alike);
    /// - every ID the continuation issues has bit 63 set, so it is larger (as an unsigned
    ///   64-bit number) than every ID this layout can ever have issued, and equals none of them;
    /// - the time field holds twice as many units: `baidu_legacy` (2016 epoch, out of room on
    ///   2024-11-20) continues until 2033-05.
    ///
    /// The price is the sign: the new IDs do not fit a signed 64-bit integer (Java `long`, SQL
    /// `BIGINT`), so sorting by ID needs an unsigned column; docs/OPERATIONS.md has the steps.
    /// A clock still inside the old range gets [`UidError::ClockBeforeStart`]: the old layout
    /// may still be issuing there.
    ///
    /// Only a layout whose time field sits right under its sign bit continues.
    ///
    /// ```
    /// use uidgen_core::{Layout, ManualClock, DefaultUidGenerator, UidGenerator};
    /// let legacy = Layout::baidu_legacy()?;
    /// let continued = legacy.clone().continued()?;
    /// assert_eq!((continued.name(), continued.first_time()), ("baidu_legacy_continued", 1 << 28));
    /// let last_legacy = legacy.compose(&legacy.parts(legacy.max_time(), 7, 8191))?;
    /// assert_eq!(continued.decode(last_legacy)?.timestamp_ms, legacy.decode(last_legacy)?.timestamp_ms);
    /// let clock = ManualClock::new(1_800_000_000_000); // 2027
    /// let generator = DefaultUidGenerator::new(continued, 7, clock)?;
    /// assert!(generator.next_id()? > last_legacy);
    /// # Ok::<(), uidgen_core::UidError>(())
    /// ```
    pub fn continued(self) -> Result<Self> {
        let (Some(&(Sign, 1)), Some(&(Time, time_bits))) =
            (self.fields.first(), self.fields.get(1))
        else {
            return Err(UidError::MalformedLayout(
                "only a layout whose time field sits right under its sign bit can be continued",
            ));
        };
        let mut fields = vec![(Time, time_bits + 1)];
        fields.extend_from_slice(&self.fields[2..]);
        let name = format!("{}_continued", self.name);
        let first_time = self.max_time() + 1;
        let mut layout = Self::new(name, &fields, self.unit, self.epoch_ms)?.with_state_of(&self);
        layout.first_time = first_time;
        Ok(layout)
    }

    /// Copy what a rebuilt layout keeps of `other`: defaults, split, random start, start.
    fn with_state_of(mut self, other: &Self) -> Self {
        for kind in [Version, Type, Method, Datacenter] {
            self.defaults.set(kind, other.defaults.get(kind));
        }
        self.worker_split = other.worker_split;
        self.random_start_bound = other.random_start_bound;
        self.first_time = other.first_time;
        self
    }
}
