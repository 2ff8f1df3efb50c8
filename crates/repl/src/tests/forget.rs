//! `forget-peer` (`engine/forget.rs`): refused while connected; forgetting a disconnected
//! peer after one write turns the reconnect's bitmap resync of that write into a full sync.

use super::*;

#[test]
fn forget_peer_is_refused_while_connected() {
    let mut pair = Pair::new(Protocol::C);
    let mut out = Vec::new();
    assert!(matches!(
        pair.nodes[A].forget_peer(pair.now, 1, &mut out),
        Err(StateError::ForgetConnected { .. })
    ));
    assert_eq!(
        pair.nodes[A].forget_peer(pair.now, 9, &mut out),
        Err(StateError::NoSuchPeer(9))
    );
    assert_eq!(pair.out_of_sync(), 0, "a refusal changes nothing");
}

#[test]
fn a_forgotten_peer_gets_a_full_sync_on_reconnect() {
    let mut pair = Pair::split(1 << 20);
    pair.write_alone(A, 1, 0, 7, 4096);
    assert_eq!(pair.out_of_sync(), 4096);
    let mut out = Vec::new();
    pair.nodes[A]
        .forget_peer(pair.now, 1, &mut out)
        .expect("forget-peer");
    pair.route(A, out);
    pair.deliver_all();
    assert_eq!(
        pair.out_of_sync(),
        VOLUME_BYTES,
        "every block is out of sync for the forgotten peer"
    );
    let persisted = pair.persisted[A].clone().expect("the metadata was written");
    assert!(!persisted
        .departed
        .contains(NodeId::new(1).expect("node id")));
    pair.connect();
    for _ in 0..200 {
        if pair.out_of_sync() == 0 && pair.resync_sent_bytes[A] > 0 {
            break;
        }
        pair.tick_both();
        pair.deliver_all();
    }
    assert_eq!(pair.out_of_sync(), 0, "the resync finished");
    assert_eq!(
        pair.resync_sent_bytes[A], VOLUME_BYTES,
        "the whole volume was resent"
    );
    assert_eq!(pair.disks[A], pair.disks[B]);
}
