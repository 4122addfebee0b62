//! The label naming a route, shared by the request metrics and the wait metrics.

use prometheus_client::encoding::EncodeLabelSet;

/// Label set naming a route (its matched path pattern).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RouteLabel {
    /// The route pattern, e.g. `/v1/ids`.
    pub route: String,
}

/// Label set naming an ID space (`[spaces.<name>]`: names from the configuration, never client
/// input).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct SpaceLabel {
    /// The space's name.
    pub space: String,
}
