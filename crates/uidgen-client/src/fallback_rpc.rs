//! The fallback lease calls on one peer, over gRPC (`ClaimFallbackLease`, `RenewFallbackLease`,
//! `ReleaseFallbackLease`) or HTTP (`POST /v1/fallback/leases`, `.../{worker_id}/renew`,
//! `.../{worker_id}/release`).

use serde::{Deserialize, Serialize};
use uidgen_proto::v1::{
    ClaimFallbackLeaseRequest, ReleaseFallbackLeaseRequest, RenewFallbackLeaseRequest,
};
use uidgen_worker::LeaseGrant;

use crate::transport::{Connection, Failure, http_json, path_url, status_failure};

/// A lease a server granted, and the layout it issues (as [`describe`] writes it).
#[derive(Debug, Clone)]
pub(crate) struct Granted {
    pub grant: LeaseGrant,
    pub layout: String,
}

#[derive(Serialize)]
struct ClaimBody<'a> {
    holder: &'a str,
    ttl_ms: u64,
}

#[derive(Serialize)]
struct RenewBody<'a> {
    holder: &'a str,
    ttl_ms: u64,
    issued_until_ms: u64,
}

#[derive(Serialize)]
struct ReleaseBody<'a> {
    holder: &'a str,
    issued_until_ms: u64,
}

#[derive(Deserialize)]
struct LeaseAnswer {
    worker_id: u64,
    holder: String,
    valid_until_ms: u64,
    floor_ms: u64,
    layout: LayoutAnswer,
}

#[derive(Deserialize)]
struct LayoutAnswer {
    name: String,
    epoch_ms: u64,
    fields: Vec<FieldAnswer>,
}

#[derive(Deserialize)]
struct FieldAnswer {
    name: String,
    bits: u32,
}

#[derive(Deserialize)]
struct RenewalAnswer {
    valid_until_ms: u64,
}

#[derive(Deserialize)]
struct ReleaseAnswer {
    released: bool,
}

impl Connection {
    /// Lease a fallback worker id for `holder` (a name; the server adds a token).
    pub(crate) async fn claim_fallback(
        &self,
        holder: &str,
        ttl_ms: u64,
    ) -> Result<Granted, Failure> {
        match self {
            Self::Grpc(client) => {
                let lease = client
                    .clone()
                    .claim_fallback_lease(ClaimFallbackLeaseRequest {
                        holder: holder.to_owned(),
                        ttl_ms,
                    })
                    .await
                    .map_err(status_failure)?
                    .into_inner();
                let fields = lease.fields.iter().map(|f| (f.name.as_str(), f.bits));
                Ok(Granted {
                    layout: describe(&lease.layout, fields, lease.epoch_ms),
                    grant: LeaseGrant {
                        worker_id: lease.worker_id,
                        holder: lease.holder,
                        valid_until_ms: lease.valid_until_ms,
                        floor_ms: lease.floor_ms,
                    },
                })
            }
            Self::Http { client, base } => {
                let url = path_url(base, &["v1", "fallback", "leases"]);
                let body = ClaimBody { holder, ttl_ms };
                let lease: LeaseAnswer = http_json(client.post(url).json(&body)).await?;
                let layout = &lease.layout;
                let fields = layout.fields.iter().map(|f| (f.name.as_str(), f.bits));
                Ok(Granted {
                    layout: describe(&layout.name, fields, layout.epoch_ms),
                    grant: LeaseGrant {
                        worker_id: lease.worker_id,
                        holder: lease.holder,
                        valid_until_ms: lease.valid_until_ms,
                        floor_ms: lease.floor_ms,
                    },
                })
            }
        }
    }

    /// Renew `holder`'s lease on `worker_id`: its new `valid_until`, which the store accepted.
    /// [`Failure::Gone`] when the lease is not `holder`'s any more.
    pub(crate) async fn renew_fallback(
        &self,
        worker_id: u64,
        holder: &str,
        ttl_ms: u64,
        issued_until_ms: u64,
    ) -> Result<u64, Failure> {
        match self {
            Self::Grpc(client) => Ok(client
                .clone()
                .renew_fallback_lease(RenewFallbackLeaseRequest {
                    worker_id,
                    holder: holder.to_owned(),
                    ttl_ms,
                    issued_until_ms,
                })
                .await
                .map_err(status_failure)?
                .into_inner()
                .valid_until_ms),
            Self::Http { client, base } => {
                let id = worker_id.to_string();
                let url = path_url(base, &["v1", "fallback", "leases", &id, "renew"]);
                let body = RenewBody {
                    holder,
                    ttl_ms,
                    issued_until_ms,
                };
                let answer: RenewalAnswer = http_json(client.post(url).json(&body)).await?;
                Ok(answer.valid_until_ms)
            }
        }
    }

    /// Give `holder`'s lease on `worker_id` back; `false` when it was not `holder`'s.
    pub(crate) async fn release_fallback(
        &self,
        worker_id: u64,
        holder: &str,
        issued_until_ms: u64,
    ) -> Result<bool, Failure> {
        match self {
            Self::Grpc(client) => Ok(client
                .clone()
                .release_fallback_lease(ReleaseFallbackLeaseRequest {
                    worker_id,
                    holder: holder.to_owned(),
                    issued_until_ms,
                })
                .await
                .map_err(status_failure)?
                .into_inner()
                .released),
            Self::Http { client, base } => {
                let id = worker_id.to_string();
                let url = path_url(base, &["v1", "fallback", "leases", &id, "release"]);
                let body = ReleaseBody {
                    holder,
                    issued_until_ms,
                };
                let answer: ReleaseAnswer = http_json(client.post(url).json(&body)).await?;
                Ok(answer.released)
            }
        }
    }
}

/// A layout as one comparable line: the name with `-` read as `_`, field widths from the
/// most significant (those with bits), the epoch.
pub(crate) fn describe<'a>(
    name: &str,
    fields: impl Iterator<Item = (&'a str, u32)>,
    epoch_ms: u64,
) -> String {
    let fields: Vec<String> = fields
        .filter(|(_, bits)| *bits > 0)
        .map(|(name, bits)| format!("{name}:{bits}"))
        .collect();
    format!(
        "{} [{}] epoch {epoch_ms} ms",
        name.replace('-', "_"),
        fields.join(" ")
    )
}
