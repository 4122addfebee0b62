//! [`Gateway`]: the few etcd v3 calls this crate makes, through etcd's JSON gateway
//! (`POST /v3/kv/range`, `/v3/kv/txn`, `/v3/lease/grant`, `/v3/lease/keepalive`,
//! `/v3/lease/revoke`; keys and values in base64, 64-bit numbers as strings), over the HTTP
//! client already in the tree. See <https://etcd.io/docs/v3.4/dev-guide/api_grpc_gateway/>.
//!
//! Why not the `etcd-client` crate: its build script compiles etcd's `.proto` files with
//! tonic-build, which needs a system `protoc`, and building the service must need nothing but
//! Rust.

use std::sync::Arc;
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use serde_json::{Value, json};

use uidgen_worker::RevisionWatch;

use crate::error::{EtcdError, Result};
use crate::options::EtcdOptions;

/// A key and its value as etcd keeps them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Kv {
    pub(crate) key: String,
    pub(crate) value: Vec<u8>,
    /// The revision that created the key (0: it does not exist).
    pub(crate) create_revision: i64,
    /// The revision of its last write.
    pub(crate) mod_revision: i64,
    /// The lease it is attached to (0: none).
    pub(crate) lease: i64,
}

/// A transaction's outcome: which branch ran, and each of its operations' ranges (empty for a
/// put).
#[derive(Debug)]
pub(crate) struct TxnResult {
    pub(crate) succeeded: bool,
    /// The cluster's revision after the transaction (a key the transaction created has it as
    /// its create revision).
    pub(crate) revision: i64,
    pub(crate) ranges: Vec<Vec<Kv>>,
}

/// One compare of a transaction.
pub(crate) fn compare_create(key: &str, revision: i64) -> Value {
    json!({"key": B64.encode(key), "target": "CREATE", "result": "EQUAL",
           "create_revision": revision.to_string()})
}

/// One compare of a transaction: the key's last write is `revision` (0: it does not exist).
pub(crate) fn compare_mod(key: &str, revision: i64) -> Value {
    json!({"key": B64.encode(key), "target": "MOD", "result": "EQUAL",
           "mod_revision": revision.to_string()})
}

/// A put operation of a transaction, attached to `lease` unless it is 0.
pub(crate) fn put(key: &str, value: &[u8], lease: i64) -> Value {
    let mut put = json!({"key": B64.encode(key), "value": B64.encode(value)});
    if lease != 0 {
        put["lease"] = Value::String(lease.to_string());
    }
    json!({ "request_put": put })
}

/// A range operation of a transaction: one key.
pub(crate) fn get(key: &str) -> Value {
    json!({"request_range": {"key": B64.encode(key)}})
}

/// etcd's JSON gateway on the configured endpoints.
#[derive(Debug, Clone)]
pub(crate) struct Gateway {
    http: reqwest::Client,
    endpoints: Vec<String>,
    /// The highest revision any answer carried: one that goes below it means etcd lost data
    /// or was restored from an older snapshot (every request here is linearizable, so a
    /// healthy cluster's answers never go back, whichever member answers).
    revisions: Arc<RevisionWatch>,
}

/// The HTTP client every request to `options`' endpoints goes through (each request bounded
/// by the request timeout), and the endpoints without a trailing slash.
pub(crate) fn http_to(options: &EtcdOptions) -> Result<(reqwest::Client, Vec<String>)> {
    let http = reqwest::Client::builder()
        .timeout(options.request_timeout)
        .connect_timeout(options.request_timeout.min(Duration::from_secs(1)))
        .build()
        .map_err(|e| EtcdError::InvalidOptions {
            field: "endpoints",
            reason: format!("cannot build an HTTP client: {e}"),
        })?;
    let endpoints = options
        .endpoints
        .iter()
        .map(|e| e.trim_end_matches('/').to_owned())
        .collect();
    Ok((http, endpoints))
}

impl Gateway {
    pub(crate) fn new(options: &EtcdOptions) -> Result<Self> {
        let (http, endpoints) = http_to(options)?;
        Ok(Self {
            http,
            endpoints,
            revisions: Arc::default(),
        })
    }

    /// The revisions the answers carried: see [`RevisionWatch`].
    pub(crate) fn revisions(&self) -> &RevisionWatch {
        &self.revisions
    }

    /// POST `body` to `path` on the first endpoint that answers. `Unreachable` when none does.
    ///
    /// Cancel safety: a request dropped midway may or may not have been applied; callers only
    /// act on an answer they read.
    async fn call(&self, action: &'static str, path: &str, body: &Value) -> Result<Value> {
        let mut last = String::from("no endpoint");
        for endpoint in &self.endpoints {
            let sent = self
                .http
                .post(format!("{endpoint}{path}"))
                .json(body)
                .send()
                .await;
            let response = match sent {
                Ok(response) => response,
                Err(error) => {
                    last = format!("{endpoint}: {error}");
                    continue;
                }
            };
            let status = response.status();
            let text = match response.text().await {
                Ok(text) => text,
                Err(error) => {
                    last = format!("{endpoint}: {error}");
                    continue;
                }
            };
            let parsed: Value = serde_json::from_str(&text).map_err(|e| EtcdError::Etcd {
                endpoint: endpoint.clone(),
                action,
                reason: format!(
                    "answer is not JSON ({e}): {}",
                    text.chars().take(200).collect::<String>()
                ),
            })?;
            if !status.is_success() || parsed.get("error").is_some() {
                let reason = parsed
                    .get("message")
                    .or_else(|| parsed.get("error"))
                    .and_then(Value::as_str)
                    .map_or_else(|| format!("HTTP {status}"), str::to_owned);
                // A member without a leader cannot answer; another member may.
                if reason.contains("no leader") || status.is_server_error() {
                    last = format!("{endpoint}: {reason}");
                    continue;
                }
                return Err(EtcdError::Etcd {
                    endpoint: endpoint.clone(),
                    action,
                    reason,
                });
            }
            // A keep-alive's header is inside its `result`; every other answer's at the top.
            let header = parsed
                .get("header")
                .or_else(|| parsed.get("result").and_then(|r| r.get("header")));
            if let Some(header) = header {
                self.revisions.observe(int(&header["revision"]));
            }
            return Ok(parsed);
        }
        Err(EtcdError::Unreachable {
            endpoints: self.endpoints.join(","),
            reason: last,
        })
    }

    /// A new lease of `ttl` (whole seconds, at least one).
    pub(crate) async fn grant(&self, ttl: Duration) -> Result<i64> {
        let secs = ttl.as_secs().max(1);
        let reply = self
            .call(
                "granting a lease",
                "/v3/lease/grant",
                &json!({"TTL": secs.to_string()}),
            )
            .await?;
        match int(&reply["ID"]) {
            0 => Err(self.unreadable("granting a lease", &reply)),
            id => Ok(id),
        }
    }

    /// Keep `lease` alive: `Some(ttl)` while it lives, `None` once etcd no longer has it.
    pub(crate) async fn keep_alive(&self, lease: i64) -> Result<Option<i64>> {
        let reply = self
            .call(
                "keeping the lease alive",
                "/v3/lease/keepalive",
                &json!({"ID": lease.to_string()}),
            )
            .await?;
        let ttl = int(&reply["result"]["TTL"]);
        Ok((ttl > 0).then_some(ttl))
    }

    /// Revoke `lease`: every key attached to it goes.
    pub(crate) async fn revoke(&self, lease: i64) -> Result<()> {
        self.call(
            "revoking the lease",
            "/v3/lease/revoke",
            &json!({"ID": lease.to_string()}),
        )
        .await
        .map(drop)
    }

    /// Every key under `prefix` (which ends in `/`).
    pub(crate) async fn list(&self, action: &'static str, prefix: &str) -> Result<Vec<Kv>> {
        let reply = self
            .call(
                action,
                "/v3/kv/range",
                &json!({"key": B64.encode(prefix), "range_end": B64.encode(prefix_end(prefix))}),
            )
            .await?;
        kvs(&reply)
    }

    /// One key, if it exists.
    pub(crate) async fn get(&self, action: &'static str, key: &str) -> Result<Option<Kv>> {
        let reply = self
            .call(action, "/v3/kv/range", &json!({"key": B64.encode(key)}))
            .await?;
        Ok(kvs(&reply)?.into_iter().next())
    }

    /// Whether any key starts with `prefix` (which ends in `/`).
    pub(crate) async fn any(&self, action: &'static str, prefix: &str) -> Result<bool> {
        let reply = self
            .call(
                action,
                "/v3/kv/range",
                &json!({"key": B64.encode(prefix), "range_end": B64.encode(prefix_end(prefix)),
                        "limit": "1", "keys_only": true}),
            )
            .await?;
        Ok(!kvs(&reply)?.is_empty())
    }

    /// One transaction: if every compare holds, `success`, else `failure`.
    pub(crate) async fn txn(
        &self,
        action: &'static str,
        compare: Vec<Value>,
        success: Vec<Value>,
        failure: Vec<Value>,
    ) -> Result<TxnResult> {
        let reply = self
            .call(
                action,
                "/v3/kv/txn",
                &json!({"compare": compare, "success": success, "failure": failure}),
            )
            .await?;
        let ranges = reply["responses"]
            .as_array()
            .map(|responses| {
                responses
                    .iter()
                    .map(|r| r.get("response_range").map_or_else(|| Ok(Vec::new()), kvs))
                    .collect::<Result<Vec<_>>>()
            })
            .transpose()?
            .unwrap_or_default();
        Ok(TxnResult {
            // The gateway leaves out a field at its default: no `succeeded` means false.
            succeeded: reply["succeeded"].as_bool().unwrap_or(false),
            revision: int(&reply["header"]["revision"]),
            ranges,
        })
    }

    #[cold]
    fn unreadable(&self, action: &'static str, reply: &Value) -> EtcdError {
        EtcdError::Etcd {
            endpoint: self.endpoints.join(","),
            action,
            reason: format!("unexpected answer {reply}"),
        }
    }
}

/// The range end that covers every key starting with `prefix`: its last byte plus one.
fn prefix_end(prefix: &str) -> Vec<u8> {
    let mut end = prefix.as_bytes().to_vec();
    while let Some(last) = end.pop() {
        if last < u8::MAX {
            end.push(last + 1);
            return end;
        }
    }
    // All 0xff (never for our prefixes): "\0" means every key from `prefix` on.
    vec![0]
}

/// A 64-bit number the gateway wrote as a string (or, from other gateways, as a number); 0
/// when absent.
fn int(value: &Value) -> i64 {
    match value {
        Value::String(text) => text.parse().unwrap_or(0),
        Value::Number(n) => n.as_i64().unwrap_or(0),
        _ => 0,
    }
}

/// The `kvs` of a range answer.
fn kvs(reply: &Value) -> Result<Vec<Kv>> {
    let Some(list) = reply["kvs"].as_array() else {
        return Ok(Vec::new());
    };
    list.iter()
        .map(|kv| {
            let bytes = |field: &str| {
                kv[field]
                    .as_str()
                    .map_or(Ok(Vec::new()), |text| B64.decode(text))
            };
            let bad = |e: base64::DecodeError| EtcdError::Etcd {
                endpoint: String::new(),
                action: "reading keys",
                reason: format!("a key or value is not base64: {e}"),
            };
            Ok(Kv {
                key: String::from_utf8_lossy(&bytes("key").map_err(bad)?).into_owned(),
                value: bytes("value").map_err(bad)?,
                create_revision: int(&kv["create_revision"]),
                mod_revision: int(&kv["mod_revision"]),
                lease: int(&kv["lease"]),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_end_is_the_next_key_after_every_key_with_the_prefix() {
        assert_eq!(prefix_end("/a/"), b"/a0".to_vec());
        assert_eq!(prefix_end("ab"), b"ac".to_vec());
    }

    #[test]
    fn int_reads_strings_and_numbers() {
        assert_eq!(int(&json!("42")), 42);
        assert_eq!(int(&json!(7)), 7);
        assert_eq!(int(&Value::Null), 0);
    }
}
