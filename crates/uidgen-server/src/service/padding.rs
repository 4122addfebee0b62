//! What handlers waiting for a generator's ring await, woken by its padding thread.

use std::sync::{Arc, OnceLock};

use tokio::sync::Notify;
use uidgen_core::UidGenerator;

/// What a handler waiting for the ring awaits: a [`Notify`] the padding thread wakes after
/// every refill and when it stops, connected to the generator's stock (through
/// [`UidGenerator::on_padded`]) on the first wait, so however the state was built, its waiters
/// are woken.
#[derive(Debug, Default)]
pub struct PaddingSignal {
    notify: Arc<Notify>,
    connected: OnceLock<bool>,
}

impl PaddingSignal {
    /// The signal of `generator`'s stock, connecting it first if this is the first wait.
    pub(super) fn of(&self, generator: &dyn UidGenerator) -> &Notify {
        self.connected.get_or_init(|| {
            let notify = Arc::clone(&self.notify);
            // notify_waiters, not notify_one: every handler waiting may find IDs now, and none
            // is left a permit to wake later to an empty ring.
            generator.on_padded(Arc::new(move || notify.notify_waiters()))
        });
        &self.notify
    }
}
