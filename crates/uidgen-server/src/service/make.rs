//! Building an ID from its fields, the same over HTTP and gRPC: every field that does not fit
//! the layout is named.

use uidgen_core::{Layout, UidParts};

use super::error::FieldErrors;

/// Every field of `parts` that does not fit `layout`, by its name in a make request (`time`,
/// `worker`, `sequence`, `version`, `type`, `method`, `datacenter`), each with its own sentence. Each field
/// is tried alone, the others zero, so every field that does not fit is named, not only the
/// first one `compose` meets (HTTP's make route and gRPC's `MakeId` both report them all).
pub fn misfits(layout: &Layout, parts: &UidParts) -> FieldErrors {
    let zero = UidParts::default();
    let alone: [(&str, UidParts); 7] = [
        (
            "time",
            UidParts {
                time: parts.time,
                ..zero
            },
        ),
        (
            "worker",
            UidParts {
                worker: parts.worker,
                ..zero
            },
        ),
        (
            "sequence",
            UidParts {
                sequence: parts.sequence,
                ..zero
            },
        ),
        (
            "version",
            UidParts {
                version: parts.version,
                ..zero
            },
        ),
        (
            "type",
            UidParts {
                kind: parts.kind,
                ..zero
            },
        ),
        (
            "method",
            UidParts {
                method: parts.method,
                ..zero
            },
        ),
        (
            "datacenter",
            UidParts {
                datacenter: parts.datacenter,
                ..zero
            },
        ),
    ];
    alone
        .into_iter()
        .filter_map(|(name, single)| {
            layout
                .compose(&single)
                .err()
                .map(|e| (name.to_owned(), e.to_string()))
        })
        .collect()
}
