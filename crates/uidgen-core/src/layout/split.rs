//! A worker field read as two parts: a machine part above a process part.
//!
//! Twitter's Snowflake cut its 10 worker bits into a 5-bit datacenter id and a 5-bit worker id;
//! the Snowflake-variant write-up behind the `keyworker` preset cuts them into a 5-bit machine
//! part (a hash of the host's MAC addresses) and a 5-bit process part (from the process id).
//! The split changes no bit of any ID: generators still stamp one worker number, and
//! [`WorkerSplit::join`] / [`WorkerSplit::split`] convert between that number and its parts,
//! so that decoding can show both.

use super::FieldKind;
use crate::error::{Result, UidError};

/// How a layout's worker field divides into a machine part (the high bits) and a process part
/// (the low bits). A layout has one only when its preset says so
/// ([`Layout::worker_split`](super::Layout::worker_split)).
///
/// ```
/// use uidgen_core::Layout;
/// let split = Layout::keyworker()?.worker_split().expect("keyworker splits its worker field");
/// assert_eq!((split.machine_bits(), split.process_bits()), (5, 5));
/// let worker = split.join(3, 17)?;
/// assert_eq!(worker, (3 << 5) | 17);
/// let parts = split.split(worker);
/// assert_eq!((parts.machine, parts.process), (3, 17));
/// assert!(split.join(32, 0).is_err()); // 5 machine bits hold 0 to 31
/// # Ok::<(), uidgen_core::UidError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct WorkerSplit {
    machine_bits: u32,
    process_bits: u32,
}

/// A worker number's two parts under a [`WorkerSplit`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct WorkerParts {
    /// The high part: which machine.
    pub machine: u64,
    /// The low part: which process on that machine.
    pub process: u64,
}

impl WorkerSplit {
    /// Split a `worker_bits`-wide field so that its lowest `process_bits` are the process part.
    /// Both parts need at least one bit.
    pub(super) fn new(worker_bits: u32, process_bits: u32) -> Result<Self> {
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

    /// The largest machine part.
    pub fn max_machine(self) -> u64 {
        low_mask(self.machine_bits)
    }

    /// The largest process part.
    pub fn max_process(self) -> u64 {
        low_mask(self.process_bits)
    }

    /// A worker number's parts (bits above the field are ignored).
    pub fn split(self, worker: u64) -> WorkerParts {
        WorkerParts {
            machine: (worker >> self.process_bits) & self.max_machine(),
            process: worker & self.max_process(),
        }
    }

    /// The worker number with these parts, checking that each fits its bits.
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
}

/// The lowest `bits` bits set (`bits` < 64: a split part is narrower than its field).
fn low_mask(bits: u32) -> u64 {
    debug_assert!(bits < 64, "a split part is narrower than the worker field");
    (1u64 << bits) - 1
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn both_parts_need_a_bit() {
        assert!(WorkerSplit::new(10, 0).is_err());
        assert!(WorkerSplit::new(10, 10).is_err());
        let split = WorkerSplit::new(10, 4).unwrap();
        assert_eq!((split.machine_bits(), split.max_machine()), (6, 63));
        assert_eq!((split.process_bits(), split.max_process()), (4, 15));
    }

    #[test]
    fn join_and_split_are_inverses_over_the_whole_field() {
        let split = WorkerSplit::new(10, 5).unwrap();
        for worker in 0..1024 {
            let parts = split.split(worker);
            assert_eq!(split.join(parts.machine, parts.process).unwrap(), worker);
        }
        assert_eq!(
            split.join(0, 32).unwrap_err().to_string(),
            "invalid option `worker`: process part 32 does not fit in 5 bits (maximum 31)"
        );
    }
}
