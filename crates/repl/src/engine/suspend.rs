//! `suspend-io` (drbdadm's verb): the administrator freezes client I/O until `resume-io`.
//! Shown as `suspended:user`, alongside fencing's and quorum's reasons.
//!
//! Invariants:
//! - While suspended no new client write starts: it waits (in order, with the writes held
//!   for other reasons) and nothing fails; writes already in flight finish as usual, so
//!   suspending never loses or tears an acknowledged write.
//! - `resume-io` starts the waiting writes at once (unless fencing or quorum still hold
//!   them); it also lifts fencing's freeze, as before (`fence.rs`).
//! - Client reads do not pass through the engine: the driver holds them while
//!   [`Engine::user_suspended`] says so.

use super::*;

impl<P: Clone> Engine<P> {
    /// `suspend-io`: new client writes wait until `resume-io`. Idempotent.
    pub fn suspend_io(&mut self, out: &mut Vec<Action<P>>) {
        if !self.user_suspended {
            self.user_suspended = true;
            out.push(Action::StateChanged);
        }
    }

    /// Whether `suspend-io` holds client I/O now.
    pub fn user_suspended(&self) -> bool {
        self.user_suspended
    }

    /// The `suspend-io` part of `resume-io`: the waiting writes start unless something else
    /// still holds them.
    pub(super) fn resume_user_io(&mut self, now: Time, out: &mut Vec<Action<P>>) {
        if self.user_suspended {
            self.user_suspended = false;
            out.push(Action::StateChanged);
            self.retry_after_quorum(now, out);
        }
    }
}
