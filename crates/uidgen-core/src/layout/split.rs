//! A worker field read as two parts: a machine part and a process part.
//!
//! Twitter's Snowflake cut its 10 worker bits into a 5-bit datacenter id and a 5-bit worker id
//! (uidgen models that as a field of its own, [`FieldKind::Datacenter`]); the Snowflake-variant
//! write-up behind the `keyworker` preset cuts them into a 5-bit machine part (a hash of the
//! host's MAC addresses) and a 5-bit process part (from the process id).
//!
//! Two numbers are kept apart here:
//! - the **worker number** that assigners hand out and generators are given: always
//!   `machine << process_bits | process`, so that one machine's processes are consecutive
//!   numbers (how the `machine` assigner of `uidgen-store` walks them);
//! - the **field bits** an ID carries: the same two parts, in the [`PartOrder`] the layout
//!   names. The write-up's code puts the process part *above* the machine part
//!   (`processId << 17 | machineId << 12`), so `keyworker` IDs carry `process << 5 | machine`.
//!
//! [`WorkerSplit::field_bits`] and [`WorkerSplit::worker_of_field`] convert between the two;
//! [`Layout::compose`](super::Layout::compose) and [`Layout::decompose`](super::Layout::decompose)
//! apply them, so callers only ever see worker numbers and parts.
//!
//! [`FieldKind::Datacenter`]: crate::FieldKind::Datacenter

use crate::error::{Result, UidError};
use crate::fields::FieldKind;

/// Which part of a split worker field holds its high bits.
///
/// ```
/// use uidgen_core::Layout;
/// use uidgen_core::layout::PartOrder;
/// let split = Layout::keyworker()?.worker_split().expect("keyworker splits its worker field");
/// assert_eq!(split.order(), PartOrder::ProcessHigh); // the write-up's `processId << 17`
/// # Ok::<(), uidgen_core::UidError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum PartOrder {
    /// The machine part above the process part: the field bits are the worker number itself.
    MachineHigh,
    /// The process part above the machine part, as the `keyworker` write-up's code has it.
    ProcessHigh,
}

/// How a layout's worker field divides into a machine part and a process part. A layout has
/// one only when its preset or builder says so
/// ([`Layout::worker_split`](super::Layout::worker_split)).
///
/// ```
/// use uidgen_core::Layout;
/// let split = Layout::keyworker()?.worker_split().expect("keyworker splits its worker field");
/// assert_eq!((split.machine_bits(), split.process_bits()), (5, 5));
/// // The worker number: machine-major, whatever the order in the ID.
/// let worker = split.join(3, 17)?;
/// assert_eq!(worker, (3 << 5) | 17);
/// let parts = split.split(worker);
/// assert_eq!((parts.machine, parts.process), (3, 17));
/// // The bits a keyworker ID carries: process above machine.
/// assert_eq!(split.field_bits(worker), (17 << 5) | 3);
/// assert_eq!(split.worker_of_field((17 << 5) | 3), worker);
/// assert!(split.join(32, 0).is_err()); // 5 machine bits hold 0 to 31
/// # Ok::<(), uidgen_core::UidError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct WorkerSplit {
    machine_bits: u32,
    process_bits: u32,
    order: PartOrder,
}

/// A worker number's two parts under a [`WorkerSplit`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct WorkerParts {
    /// Which machine.
    pub machine: u64,
    /// Which process on that machine.
    pub process: u64,
}

/// Where one part of a split worker field sits inside the field.
///
/// ```
/// use uidgen_core::Layout;
/// let split = Layout::keyworker()?.worker_split().expect("split");
/// let [high, low] = split.spans();
/// assert_eq!((high.name, high.bits, high.offset), ("process", 5, 5));
/// assert_eq!((low.name, low.bits, low.offset), ("machine", 5, 0));
/// # Ok::<(), uidgen_core::UidError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PartSpan {
    /// `"machine"` or `"process"`.
    pub name: &'static str,
    /// Its width.
    pub bits: u32,
    /// Its shift from the worker field's lowest bit (add the field's shift for the ID's).
    pub offset: u32,
}

impl WorkerSplit {
    /// Split a `worker_bits`-wide field so that the process part is `process_bits` wide, the
    /// parts placed in `order`. Both parts need at least one bit.
    pub(super) fn new(worker_bits: u32, process_bits: u32, order: PartOrder) -> Result<Self> {
        if process_bits == 0 || process_bits >= worker_bits {
            return Err(UidError::InvalidFieldWidth {
                field: FieldKind::Worker,
                bits: worker_bits,
                reason: "a split worker field needs at least one machine bit and one process bit",
            });
        }
        Ok(Self {
            machine_bits: worker_bits - process_bits,
            process_bits,
            order,
        })
    }

    /// Width of the machine part.
    pub fn machine_bits(self) -> u32 {
        self.machine_bits
    }

    /// Width of the process part.
    pub fn process_bits(self) -> u32 {
        self.process_bits
    }

    /// Which part holds the field's high bits.
    pub fn order(self) -> PartOrder {
        self.order
    }

    /// The largest machine part.
    pub fn max_machine(self) -> u64 {
        low_mask(self.machine_bits)
    }

    /// The largest process part.
    pub fn max_process(self) -> u64 {
        low_mask(self.process_bits)
    }

    /// Both parts as they sit in the field, most significant first.
    pub fn spans(self) -> [PartSpan; 2] {
        let machine = |offset| PartSpan {
            name: "machine",
            bits: self.machine_bits,
            offset,
        };
        let process = |offset| PartSpan {
            name: "process",
            bits: self.process_bits,
            offset,
        };
        match self.order {
            PartOrder::MachineHigh => [machine(self.process_bits), process(0)],
            PartOrder::ProcessHigh => [process(self.machine_bits), machine(0)],
        }
    }

    /// A worker number's parts (bits above the field are ignored).
    pub fn split(self, worker: u64) -> WorkerParts {
        WorkerParts {
            machine: (worker >> self.process_bits) & self.max_machine(),
            process: worker & self.max_process(),
        }
    }

    /// The worker number with these parts, `machine << process_bits | process`, checking that
    /// each fits its bits.
    pub fn join(self, machine: u64, process: u64) -> Result<u64> {
        let parts = [
            ("machine", machine, self.machine_bits, self.max_machine()),
            ("process", process, self.process_bits, self.max_process()),
        ];
        for (what, value, bits, max) in parts {
            if value > max {
                return Err(UidError::InvalidOption {
                    name: "worker",
                    reason: format!(
                        "{what} part {value} does not fit in {bits} bits (maximum {max})"
                    ),
                });
            }
        }
        Ok((machine << self.process_bits) | process)
    }

    /// The bits an ID's worker field carries for worker number `worker` (at most as wide as
    /// the field; bits above it are ignored).
    #[inline]
    pub fn field_bits(self, worker: u64) -> u64 {
        match self.order {
            PartOrder::MachineHigh => worker & low_mask(self.machine_bits + self.process_bits),
            PartOrder::ProcessHigh => {
                let parts = self.split(worker);
                (parts.process << self.machine_bits) | parts.machine
            }
        }
    }

    /// The worker number an ID's worker field stands for: the inverse of
    /// [`field_bits`](Self::field_bits).
    pub fn worker_of_field(self, field: u64) -> u64 {
        match self.order {
            PartOrder::MachineHigh => field & low_mask(self.machine_bits + self.process_bits),
            PartOrder::ProcessHigh => {
                let process = (field >> self.machine_bits) & self.max_process();
                let machine = field & self.max_machine();
                (machine << self.process_bits) | process
            }
        }
    }
}

/// The lowest `bits` bits set. A worker field holds at most 63 bits (time takes at least one),
/// so `bits` < 64.
fn low_mask(bits: u32) -> u64 {
    debug_assert!(bits < 64, "a worker field is narrower than the ID");
    (1u64 << bits) - 1
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn both_parts_need_a_bit() {
        assert!(WorkerSplit::new(10, 0, PartOrder::MachineHigh).is_err());
        assert!(WorkerSplit::new(10, 10, PartOrder::ProcessHigh).is_err());
        let split = WorkerSplit::new(10, 4, PartOrder::MachineHigh).unwrap();
        assert_eq!((split.machine_bits(), split.max_machine()), (6, 63));
        assert_eq!((split.process_bits(), split.max_process()), (4, 15));
    }

    #[test]
    fn join_split_and_field_bits_are_inverses_over_the_whole_field() {
        for order in [PartOrder::MachineHigh, PartOrder::ProcessHigh] {
            let split = WorkerSplit::new(10, 4, order).unwrap();
            let mut fields = std::collections::HashSet::new();
            for worker in 0..1024 {
                let parts = split.split(worker);
                assert_eq!(split.join(parts.machine, parts.process).unwrap(), worker);
                let field = split.field_bits(worker);
                assert!(field < 1024, "{order:?}: {worker} -> {field}");
                assert_eq!(split.worker_of_field(field), worker, "{order:?}");
                fields.insert(field);
            }
            assert_eq!(fields.len(), 1024, "{order:?}: a bijection");
        }
        let split = WorkerSplit::new(10, 5, PartOrder::ProcessHigh).unwrap();
        assert_eq!(
            split.join(0, 32).unwrap_err().to_string(),
            "invalid option `worker`: process part 32 does not fit in 5 bits (maximum 31)"
        );
    }

    #[test]
    fn spans_place_the_parts_in_their_order() {
        let spans = |order| {
            WorkerSplit::new(10, 3, order)
                .unwrap()
                .spans()
                .map(|s| (s.name, s.bits, s.offset))
        };
        assert_eq!(
            spans(PartOrder::MachineHigh),
            [("machine", 7, 3), ("process", 3, 0)]
        );
        assert_eq!(
            spans(PartOrder::ProcessHigh),
            [("process", 3, 7), ("machine", 7, 0)]
        );
    }
}
