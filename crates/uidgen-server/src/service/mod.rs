//! The service both adapters serve: the shared state ([`state`]), taking IDs ([`generate`]) and
//! waiting for a ring's padding ([`padding`]), readiness ([`ready`], made of the types in
//! [`readiness`]), segment leases ([`mod@lease`]), fallback leases ([`fallback`]), building IDs
//! from fields ([`make`]), the forms IDs are written in ([`forms`]) and every failure as an
//! [`error::ApiError`] mapped from the domain's errors ([`error`]). `crate::http` and
//! `crate::grpc` are sibling adapters over it: neither imports the other.
//!
//! This file only names the modules: callers import each item from the module that defines
//! it, so no child imports its siblings through here.

pub mod callers;
pub mod clock_probe;
pub mod clock_watch;
pub mod error;
pub mod fallback;
pub mod forms;
pub mod generate;
pub mod lease;
pub mod make;
pub mod padding;
pub mod readiness;
pub mod ready;
pub mod runway;
pub mod segments;
pub mod spaces;
pub mod state;
