//! Whether a layout is Vesta's, which decides the ranges a server and an embedded generator
//! draw from (924-1023 and 0-923).

use uidgen_core::{FieldKind, Layout};
use uidgen_zk::VESTA_SERVER_RANGE;

/// Whether `layout` is one of Vesta's: a genMethod field and 1,024 machine ids, split between
/// servers and embedded generators.
///
/// ```
/// use uidgen_core::Layout;
/// use uidgen_server::config::vesta::is_vesta;
/// assert!(is_vesta(&Layout::vesta_max_peak()?));
/// assert!(!is_vesta(&Layout::snowflake()?)); // 10 worker bits, but no genMethod
/// # Ok::<(), uidgen_core::UidError>(())
/// ```
pub fn is_vesta(layout: &Layout) -> bool {
    layout.has(FieldKind::Method) && layout.max_worker_id() == VESTA_SERVER_RANGE.1
}
