//! `outdate` (`engine/outdate.rs`): refused on a Primary and while connected; on a lone
//! Secondary every consistent volume becomes Outdated in the persisted metadata, so a restart
//! attaches it Outdated; Inconsistent data is refused.

use super::*;

impl Pair {
    fn outdate(&mut self, node: usize) -> Result<(), StateError> {
        let mut out = Vec::new();
        let result = self.nodes[node].outdate(self.now, &mut out);
        self.route(node, out);
        self.deliver_all();
        result
    }
}

#[test]
fn outdate_is_refused_on_a_primary_and_while_connected() {
    let mut pair = Pair::new(Protocol::C);
    assert_eq!(pair.outdate(A), Err(StateError::IsPrimary));
    assert!(matches!(
        pair.outdate(B),
        Err(StateError::OutdateWhileConnected { .. })
    ));
    assert_eq!(
        pair.nodes[B].status().volumes[0].disk,
        DiskState::UpToDate,
        "a refusal changes nothing"
    );
}

#[test]
fn outdate_on_a_lone_secondary_is_persisted_and_survives_a_restart() {
    let mut pair = Pair::new(Protocol::C);
    pair.disconnect();
    pair.deliver_all();
    assert_eq!(pair.outdate(B), Ok(()));
    assert_eq!(pair.nodes[B].status().volumes[0].disk, DiskState::Outdated);
    let persisted = pair.persisted[B].clone().expect("the metadata was written");
    assert!(
        persisted.consistent() && !persisted.was_up_to_date(),
        "{persisted:?}"
    );
    assert_eq!(
        VolumeMeta::attach_disk_state(persisted.consistent(), persisted.was_up_to_date()),
        DiskState::Outdated
    );
    assert_eq!(
        pair.outdate(B),
        Ok(()),
        "outdating an Outdated disk again is a no-op"
    );
}

#[test]
fn inconsistent_data_cannot_be_outdated() {
    let volume = VolumeConfig {
        disk: DiskState::Inconsistent,
        ..synced_volume()
    };
    let mut node = engine_with(1, peer_config(0, Protocol::C), volume);
    let mut out = Vec::new();
    assert_eq!(
        node.outdate(Time(1), &mut out),
        Err(StateError::NotConsistent(DiskState::Inconsistent))
    );
}
