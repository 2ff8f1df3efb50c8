//! `suspend-io` / `resume-io` (`engine/suspend.rs`): a write submitted while suspended waits
//! without failing and completes after `resume-io`; the reason shows as `user`.

use super::*;

#[test]
fn a_write_waits_while_suspended_and_completes_after_resume_io() {
    let mut pair = Pair::new(Protocol::C);
    let mut out = Vec::new();
    pair.nodes[A].suspend_io(&mut out);
    pair.route(A, out);
    assert!(pair.nodes[A].io_suspended());
    assert_eq!(pair.nodes[A].suspend_reasons(), ["user"]);
    pair.write(1, 0, 7, 4096);
    pair.deliver_all();
    assert!(
        pair.completed.is_empty(),
        "nothing completes (or fails) while suspended: {:?}",
        pair.completed
    );
    let mut out = Vec::new();
    assert_eq!(pair.nodes[A].resume_io(pair.now, &mut out), Ok(()));
    pair.route(A, out);
    pair.deliver_all();
    assert!(pair.is_complete(1), "resume-io releases the write");
    assert_eq!(pair.disks[B][..4096], [7; 4096], "and it replicated");
    assert!(!pair.nodes[A].io_suspended());
    let mut out = Vec::new();
    assert_eq!(
        pair.nodes[A].resume_io(pair.now, &mut out),
        Err(StateError::NotSuspended)
    );
}
