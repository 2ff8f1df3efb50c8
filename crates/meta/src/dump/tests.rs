//! Unit tests of `dump-md`'s output: the text lines and the JSON shape (issue 3 item 1,
//! "`tandem dump-md RES` (human-readable and `--json`)"; UUIDs in DRBD's 16-hex-digit form).

use super::*;
use crate::activity_log::{format_ring, recover, AlUpdates};
use crate::{Layout, LayoutConfig, PeerSlot};

fn sources_parts() -> (Superblock, Recovery, Vec<Bitmap>) {
    let layout =
        Layout::compute(&LayoutConfig::new(Placement::Internal, 1 << 30, 2)).expect("valid");
    let mut superblock = Superblock::new(layout, 0).expect("valid");
    superblock.current_uuid = 0xE54E_3151_3A64_A2EE;
    superblock.history_uuids[0] = 0x35BC_9714_2AF7_A8A4;
    superblock.flags.consistent = true;
    superblock.peers[0] = PeerSlot {
        node_id: Some(1),
        bitmap_uuid: 0,
        flags: PeerFlags {
            outdated: true,
            full_sync: false,
        },
    };
    let ring = format_ring(8, 1237, 0).expect("formats");
    let recovery = recover(&ring, AlUpdates::Enabled).expect("reads");
    let mut bitmap = Bitmap::for_layout(&layout).expect("valid");
    bitmap.set(0, 10 * 4096).expect("in range");
    (superblock, recovery, vec![bitmap])
}

#[test]
fn text_rendering() {
    let (superblock, recovery, bitmaps) = sources_parts();
    let dump = MetaDump::new(DumpSources {
        superblock: &superblock,
        activity_log: Some(&recovery),
        bitmaps: &bitmaps,
    });
    let text = dump.render_text();
    let expected_lines = [
        "tandem metadata, version 2, node-id 0",
        "placement:      internal",
        "flags:          consistent",
        "current uuid:   E54E31513A64A2EE",
        "history uuids:  35BC97142AF7A8A4",
        "resync goal:    -",
        "peer slot 0:    node-id 1, bitmap uuid 0000000000000000, flags outdated, out of sync 10 \
         blocks (40960 bytes)",
        "peer slot 1:    unused",
        "al state:       0 hot extents (0 bytes), last transaction 7, 0 invalid ring blocks",
    ];
    for line in expected_lines {
        assert!(
            text.lines().any(|l| l == line),
            "missing {line:?} in\n{text}"
        );
    }
    assert!(text.ends_with('\n'));
}

#[test]
fn json_shape() {
    let (superblock, recovery, bitmaps) = sources_parts();
    let dump = MetaDump::new(DumpSources {
        superblock: &superblock,
        activity_log: Some(&recovery),
        bitmaps: &bitmaps,
    });
    let json = serde_json::to_value(&dump).expect("serializes");
    assert_eq!(json["current_uuid"], "E54E31513A64A2EE");
    assert_eq!(json["layout"]["placement"], "internal");
    assert_eq!(json["layout"]["al_extents"], 1237);
    assert_eq!(json["flags"]["consistent"], true);
    assert_eq!(json["peers"][0]["out_of_sync_blocks"], 10);
    assert_eq!(json["peers"][1]["node_id"], serde_json::Value::Null);
    assert_eq!(
        json["peers"][1]["out_of_sync_blocks"],
        serde_json::Value::Null,
        "no bitmap loaded"
    );
    assert_eq!(json["activity_log"]["last_seq"], 7);
}

#[test]
fn full_resync_states_render() {
    let (superblock, recovery, _) = sources_parts();
    let cases = [
        (FullResyncReason::AlDisabled, "disabled (al-updates no)"),
        (FullResyncReason::NoValidTransaction, "no valid transaction"),
        (
            FullResyncReason::WindowIncomplete { missing_seq: 5 },
            "incomplete (transaction 5 missing)",
        ),
    ];
    for (reason, text) in cases {
        let recovery = Recovery {
            full_resync: Some(reason),
            ..recovery.clone()
        };
        let dump = MetaDump::new(DumpSources {
            superblock: &superblock,
            activity_log: Some(&recovery),
            bitmaps: &[],
        });
        assert!(dump.render_text().contains(text), "{text}");
    }
}
