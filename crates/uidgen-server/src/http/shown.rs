//! How answers are shown: the zone of a time (`?tz=`) and the form of an ID (`?form=`), as the
//! ID routes, make and Vesta's `transtime` and `expid` read them.

use uidgen_core::Zone;
use uidgen_core::mask::Masker;

use super::extract::QueryParams;
use crate::service::error::ApiError;
use crate::service::forms::{self, Form};

/// `?tz=`: the zone times are shown in, UTC when absent; an unknown zone is a 400
/// `invalid_parameter` naming it (`uidgen_core::Zone::parse` is the one rule).
pub(super) fn param_zone(params: &QueryParams) -> Result<Zone, ApiError> {
    params.get("tz").map_or_else(
        || Ok(Zone::utc()),
        |text| Zone::parse(text).map_err(|e| ApiError::bad_parameter(format!("`tz`: {e}"))),
    )
}

/// `?form=`: `decimal`, `base36`, `base62`, or `masked` with the server's keys (`masker`);
/// `None` when absent.
pub(super) fn param_form<'a>(
    params: &QueryParams,
    masker: Option<&'a Masker>,
) -> Result<Option<Form<'a>>, ApiError> {
    params
        .get("form")
        .map(|text| forms::named(text, masker))
        .transpose()
}

/// How a decode or make answer is shown: the zone of its timestamp, and the form of its ID.
#[derive(Debug, Default)]
pub(super) struct Shown<'a> {
    pub(super) zone: Zone,
    pub(super) form: Option<Form<'a>>,
}

impl<'a> Shown<'a> {
    /// `?tz=` and `?form=` (`masked` with the keys of `masker`).
    pub(super) fn from_params(
        params: &QueryParams,
        masker: Option<&'a Masker>,
    ) -> Result<Self, ApiError> {
        Ok(Self {
            zone: param_zone(params)?,
            form: param_form(params, masker)?,
        })
    }
}
