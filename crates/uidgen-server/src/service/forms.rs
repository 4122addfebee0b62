//! How an ID is written in answers and read from requests: one of the core's plain forms
//! (`decimal`, `base36`, `base62`), or `masked`, a keyed permutation with the keys of `[mask]`
//! ([`uidgen_core::mask`], issue 33). HTTP's `?form=` and `uidgen decode --form` name them alike.

use std::fmt;
use std::str::FromStr;

use uidgen_core::mask::Masker;
use uidgen_core::{DecodedUid, IdForm, Layout, UidError};

use super::error::ApiError;

/// The masked form's name.
pub const MASKED: &str = "masked";

/// What a request for the masked form is told where no key is configured.
pub const NO_MASK_KEYS: &str = "the masked form needs keys, and none is configured; set \
                                `mask.keys` (UIDGEN_MASK_KEYS), see docs/OPERATIONS.md, \
                                \"Masked IDs\"";

/// A form as a request names it, before the keys are looked up.
///
/// ```
/// use uidgen_core::IdForm;
/// use uidgen_server::service::forms::FormName;
/// assert_eq!("base62".parse::<FormName>()?, FormName::Plain(IdForm::Base62));
/// assert_eq!("masked".parse::<FormName>()?, FormName::Masked);
/// assert!("hex".parse::<FormName>().is_err());
/// # Ok::<(), uidgen_core::UidError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FormName {
    /// `decimal`, `base36` or `base62`.
    Plain(IdForm),
    /// `masked`.
    Masked,
}

impl FormName {
    /// Every name, for listings and the OpenAPI document (`masked` only where keys are).
    pub fn names(masked: bool) -> Vec<&'static str> {
        let mut names: Vec<&str> = IdForm::ALL.iter().map(|form| form.name()).collect();
        if masked {
            names.push(MASKED);
        }
        names
    }

    /// The form with the keys `masker` holds; `masked` without keys is refused.
    ///
    /// ```
    /// use uidgen_server::service::forms::{Form, FormName};
    /// assert!(FormName::Masked.with_keys(None).is_err());
    /// assert!(matches!("decimal".parse::<FormName>()?.with_keys(None)?, Form::Plain(_)));
    /// # Ok::<(), uidgen_core::UidError>(())
    /// ```
    pub fn with_keys(self, masker: Option<&Masker>) -> Result<Form<'_>, UidError> {
        match (self, masker) {
            (Self::Plain(form), _) => Ok(Form::Plain(form)),
            (Self::Masked, Some(masker)) => Ok(Form::Masked(masker)),
            (Self::Masked, None) => Err(UidError::InvalidOption {
                name: "form",
                reason: NO_MASK_KEYS.to_owned(),
            }),
        }
    }
}

/// The form a request names in `name` (HTTP's `?form=`, gRPC's `form` field), `masked` with
/// `masker`'s keys: an unknown name, or `masked` without keys, is the 400 (gRPC
/// `INVALID_ARGUMENT`) both adapters answer.
pub fn named<'a>(name: &str, masker: Option<&'a Masker>) -> Result<Form<'a>, ApiError> {
    name.parse::<FormName>()
        .and_then(|name| name.with_keys(masker))
        .map_err(|e| ApiError::bad_parameter(format!("`form`: {e}")))
}

impl FromStr for FormName {
    type Err = UidError;

    fn from_str(s: &str) -> Result<Self, UidError> {
        if s == MASKED {
            return Ok(Self::Masked);
        }
        s.parse::<IdForm>()
            .map(Self::Plain)
            .map_err(|_| UidError::InvalidOption {
                name: "form",
                reason: format!(
                    "unknown ID form {:?}; expected decimal, base36, base62 or masked",
                    s.chars().take(64).collect::<String>()
                ),
            })
    }
}

impl fmt::Display for FormName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Plain(form) => f.write_str(form.name()),
            Self::Masked => f.write_str(MASKED),
        }
    }
}

/// A form ready to write and read IDs: a plain one, or the masked one with its keys.
#[derive(Debug, Clone, Copy)]
pub enum Form<'a> {
    /// `decimal`, `base36` or `base62`.
    Plain(IdForm),
    /// `masked`, with the server's keys.
    Masked(&'a Masker),
}

impl Form<'_> {
    /// `id`, an ID of `layout`, in this form. A plain form writes it without taking it apart
    /// (every ID of the layout fits its width, and a large batch stays cheap); the masked form
    /// refuses an ID the layout cannot hold.
    pub fn write(&self, layout: &Layout, id: u64) -> Result<String, UidError> {
        match self {
            Self::Plain(form) => Ok(form.encode(id, form.width(layout.max_id()))),
            Self::Masked(masker) => masker.mask(layout, id),
        }
    }

    /// A batch of IDs of `layout` in this form, in their order. A plain form's width is worked
    /// out once for the batch.
    pub fn write_all(&self, layout: &Layout, ids: Vec<u64>) -> Result<Vec<String>, UidError> {
        match self {
            Self::Plain(form) => {
                let width = form.width(layout.max_id());
                Ok(ids.into_iter().map(|id| form.encode(id, width)).collect())
            }
            Self::Masked(masker) => ids.into_iter().map(|id| masker.mask(layout, id)).collect(),
        }
    }

    /// `text`, written in this form, read back and decoded under `layout`.
    pub fn read(&self, layout: &Layout, text: &str) -> Result<DecodedUid, UidError> {
        match self {
            Self::Plain(form) => layout.decode_form(text, *form),
            Self::Masked(masker) => masker.unmask(layout, text),
        }
    }

    /// Whether this is the plain decimal number.
    pub fn is_decimal(&self) -> bool {
        matches!(self, Self::Plain(IdForm::Decimal))
    }
}
