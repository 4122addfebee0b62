//! etcd's clock, for a server that compares its own with it while it serves (issue 33,
//! "Clocks watched while serving").
//!
//! etcd's v3 API has no call that answers the server's time. Its HTTP server, the one the
//! JSON gateway is on, stamps every answer with a `Date` header (RFC 9110's IMF-fixdate, whole
//! seconds, truncated), so `GET /version` gives the server's clock at one-second resolution:
//! the true instant lies in `[Date, Date + 1 s)`. A reading takes its midpoint and adds the
//! half second to its uncertainty, on top of half the round trip. Good enough to see a clock
//! seconds off, never to judge one a few hundred milliseconds off.

use std::time::{SystemTime, UNIX_EPOCH};

use crate::error::{EtcdError, Result};
use crate::options::EtcdOptions;

/// Half the `Date` header's one-second resolution, in ms.
const HALF_RESOLUTION_MS: i64 = 500;

/// One reading of etcd's clock against this host's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EtcdClockReading {
    /// etcd's clock minus this host's, ms (positive: this host is behind).
    pub offset_ms: i64,
    /// How far the true offset may be from `offset_ms`: half the round trip plus half a
    /// second (the header's resolution).
    pub uncertainty_ms: u64,
}

/// Reads etcd's clock from the `Date` header of its `/version` answer, on the first endpoint
/// that answers.
///
/// ```no_run
/// # async fn demo() -> uidgen_etcd::Result<()> {
/// let options = uidgen_etcd::EtcdOptions::new(["http://127.0.0.1:2379"], "/uidgen", "me");
/// let reading = uidgen_etcd::EtcdClock::new(&options)?.read().await?;
/// println!("etcd is {} ms ahead, ± {} ms", reading.offset_ms, reading.uncertainty_ms);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct EtcdClock {
    http: reqwest::Client,
    endpoints: Vec<String>,
}

impl EtcdClock {
    /// A reader for `options`' endpoints, each request bounded by its request timeout.
    pub fn new(options: &EtcdOptions) -> Result<Self> {
        let (http, endpoints) = crate::gateway::http_to(options)?;
        Ok(Self { http, endpoints })
    }

    /// One reading; `Unreachable` when no endpoint answers with a `Date` it can read.
    pub async fn read(&self) -> Result<EtcdClockReading> {
        let mut last = String::from("no endpoint");
        for endpoint in &self.endpoints {
            let t0 = local_ms();
            let answer = self.http.get(format!("{endpoint}/version")).send().await;
            let t1 = local_ms();
            let date = match &answer {
                Ok(response) => response
                    .headers()
                    .get(reqwest::header::DATE)
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_owned),
                Err(error) => {
                    last = format!("{endpoint}: {error}");
                    continue;
                }
            };
            match date.as_deref().and_then(parse_http_date_ms) {
                Some(server_ms) => return Ok(measure(t0, server_ms, t1)),
                None => last = format!("{endpoint}: no readable Date header ({date:?})"),
            }
        }
        Err(EtcdError::Unreachable {
            endpoints: self.endpoints.join(","),
            reason: last,
        })
    }
}

/// The reading of a `Date` of `date_ms` (whole seconds) answered between `t0_ms` and `t1_ms`.
fn measure(t0_ms: i64, date_ms: i64, t1_ms: i64) -> EtcdClockReading {
    let round_trip = t1_ms.saturating_sub(t0_ms).max(0);
    let midpoint = t0_ms.saturating_add(round_trip / 2);
    // The header truncates: the instant is within the second after `date_ms`.
    let server_ms = date_ms.saturating_add(HALF_RESOLUTION_MS);
    EtcdClockReading {
        offset_ms: server_ms.saturating_sub(midpoint),
        uncertainty_ms: round_trip.unsigned_abs().div_ceil(2) + HALF_RESOLUTION_MS.unsigned_abs(),
    }
}

/// This host's clock in ms since the Unix epoch (before 1970 reads as negative).
fn local_ms() -> i64 {
    match SystemTime::now().duration_since(UNIX_EPOCH) {
        Ok(after) => i64::try_from(after.as_millis()).unwrap_or(i64::MAX),
        Err(before) => -i64::try_from(before.duration().as_millis()).unwrap_or(i64::MAX),
    }
}

/// An IMF-fixdate (`Sun, 29 Nov 2026 00:53:17 GMT`, what Go's HTTP server writes) in ms since
/// the Unix epoch, through the calendar uidgen reads epochs with; `None` for anything else.
fn parse_http_date_ms(text: &str) -> Option<i64> {
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let words: Vec<&str> = text.split_whitespace().collect();
    let [_weekday, day, month, year, time, "GMT"] = words.as_slice() else {
        return None;
    };
    let month = MONTHS.iter().position(|m| m == month)? + 1;
    let iso = format!("{year}-{month:02}-{day:0>2}T{time}Z");
    let ms = uidgen_core::calendar::parse_epoch_ms(&iso).ok()?;
    i64::try_from(ms).ok()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn an_http_date_reads_as_the_instant_it_names() {
        assert_eq!(parse_http_date_ms("Thu, 01 Jan 1970 00:00:00 GMT"), Some(0));
        assert_eq!(
            parse_http_date_ms("Sun, 29 Nov 2026 00:53:17 GMT"),
            Some(1_795_913_597_000)
        );
        assert_eq!(
            parse_http_date_ms("Tue, 29 Feb 2028 12:00:00 GMT"),
            Some(1_835_438_400_000)
        );
        for bad in [
            "",
            "Sun, 29 Nov 2026 00:53:17 UTC",
            "Sun, 29 Foo 2026 00:53:17 GMT",
        ] {
            assert_eq!(parse_http_date_ms(bad), None, "{bad}");
        }
    }

    #[test]
    fn a_reading_takes_the_second_s_midpoint_and_its_half_second_of_doubt() {
        // Asked at 10.000 s, answered at 10.040 s, the header said 12 s: etcd 2.48 s ahead.
        let reading = measure(10_000, 12_000, 10_040);
        assert_eq!(reading.offset_ms, 2_480);
        assert_eq!(reading.uncertainty_ms, 520);
    }

    #[tokio::test]
    async fn the_test_etcd_clock_agrees_with_this_host_s_within_its_uncertainty() {
        let endpoint = crate::testing::test_etcd();
        let options = EtcdOptions::new([endpoint.clone()], "/uidgen-clock-test", "clock");
        let reading = EtcdClock::new(&options)
            .unwrap()
            .read()
            .await
            .unwrap_or_else(|e| {
                panic!(
                    "etcd at {endpoint} ({}): {e}",
                    crate::testing::ENV_TEST_ETCD
                )
            });
        // Same host, same clock: the offset is the header's rounding and the round trip.
        assert!(
            reading.offset_ms.unsigned_abs() <= reading.uncertainty_ms,
            "{reading:?}"
        );
    }
}
