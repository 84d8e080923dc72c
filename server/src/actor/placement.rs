//! The actor's side of placement: it lends a pass the parts it reads and
//! writes (`Placement`, through `Placer::pass`) and applies what the pass
//! returns: its messages into the outbox, then its moves as a change of the
//! server's own (`change.rs`).

use super::AnkaiosServer;
use super::change::Change;
use crate::placement::Occasion;

impl AnkaiosServer {
    /// Lets placement react to `occasion`, and moves what it moved.
    pub(super) fn placement_on(&mut self, occasion: Occasion<'_>) {
        let moved = self.lifecycle.placer.pass(&self.conns, &self.desired.current, &mut self.states).on(occasion);
        let (out, change) = moved.into_change(&self.desired.current);
        self.io.out.append(out);
        if let Some(change) = change {
            self.change(Change::Server(Box::new(change)));
        }
    }
}
