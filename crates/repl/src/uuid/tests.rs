//! Tests of the generation identifiers and the handshake decision: one table row per rule of
//! drbd-semantics.md §2 (each checked from both ends), lifecycle scenarios built from the
//! operations the engine calls, the log-line format, and a mirror property.

use proptest::prelude::*;

use super::*;

const G1: u64 = 0x1111_1111_1111_1110;
const G2: u64 = 0x2222_2222_2222_2220;
const G3: u64 = 0x3333_3333_3333_3330;
const G4: u64 = 0x4444_4444_4444_4440;
const G5: u64 = 0x5555_5555_5555_5550;

fn node(id: u8) -> NodeId {
    match NodeId::new(id) {
        Ok(node) => node,
        Err(error) => panic!("test node id {id}: {error}"),
    }
}

fn nodes(local: u8, peer: u8) -> HandshakeNodes {
    match HandshakeNodes::new(node(local), node(peer)) {
        Ok(nodes) => nodes,
        Err(error) => panic!("test nodes: {error}"),
    }
}

/// Identifiers with `current`, bitmap identifiers per `(node, uuid)`, and `history`.
fn ids(current: u64, bitmaps: &[(u8, u64)], history: &[u64]) -> GenerationIds {
    let mut ids = GenerationIds::just_created();
    ids.current = current;
    for &(slot, uuid) in bitmaps {
        ids.bitmap[usize::from(slot)] = uuid;
    }
    ids.history[..history.len()].copy_from_slice(history);
    ids
}

fn crashed(mut ids: GenerationIds) -> GenerationIds {
    ids.flags.crashed_primary = true;
    ids
}

const JC: u64 = UUID_JUST_CREATED;
const AUTO: SyncDecision = SyncDecision::SplitBrain {
    auto_recoverable: true,
};
const MANUAL: SyncDecision = SyncDecision::SplitBrain {
    auto_recoverable: false,
};
const SOURCE_BITMAP: SyncDecision = SyncDecision::Source(Transfer::Bitmap);
const SOURCE_FULL: SyncDecision = SyncDecision::Source(Transfer::Full);
const TARGET_BITMAP: SyncDecision = SyncDecision::Target(Transfer::Bitmap);
const TARGET_FULL: SyncDecision = SyncDecision::Target(Transfer::Full);

/// Checks `compare` from node 0 (`local`) and, mirrored, from node 1 (`peer`).
#[track_caller]
fn check(local: &GenerationIds, peer: &GenerationIds, decision: SyncDecision, rule: Rule) {
    let expected = Handshake { decision, rule };
    let pair = nodes(0, 1);
    assert_eq!(compare(local, peer, pair), expected, "seen from node 0");
    assert_eq!(
        compare(peer, local, pair.mirrored()),
        expected.mirrored(),
        "seen from node 1"
    );
}

/// One row per rule of drbd-semantics.md §2, in rule order.
#[test]
fn every_rule_from_both_ends() {
    #[rustfmt::skip]
    let rows: &[(&str, GenerationIds, GenerationIds, SyncDecision, Rule)] = &[
        ("both fresh", ids(JC, &[], &[]), ids(JC, &[], &[]),
            SyncDecision::NoSync, Rule::BothJustCreated),
        ("zero and primary-marked fresh", ids(0, &[], &[]), ids(JC | 1, &[], &[]),
            SyncDecision::NoSync, Rule::BothJustCreated),
        ("local fresh", ids(JC, &[], &[]), ids(G1, &[], &[]),
            TARGET_FULL, Rule::JustCreatedSelf),
        ("peer fresh", ids(G1, &[], &[]), ids(0, &[], &[]),
            SOURCE_FULL, Rule::JustCreatedPeer),
        ("equal current, primary bit ignored", ids(G1 | 1, &[], &[]), ids(G1, &[], &[]),
            SyncDecision::NoSync, Rule::EqualCurrent),
        ("local crashed as primary", crashed(ids(G1, &[], &[])), ids(G1, &[], &[]),
            SOURCE_BITMAP, Rule::CrashedPrimarySelf),
        ("peer crashed as primary", ids(G1, &[], &[]), crashed(ids(G1 | 1, &[], &[])),
            TARGET_BITMAP, Rule::CrashedPrimaryPeer),
        ("both crashed: lower node id is source",
            crashed(ids(G1, &[], &[])), crashed(ids(G1, &[], &[])),
            SOURCE_BITMAP, Rule::CrashedPrimaryBoth),
        ("peer counts changes since our current", ids(G1, &[], &[]), ids(G2, &[(0, G1 | 1)], &[]),
            TARGET_BITMAP, Rule::BitmapPeer),
        ("we count changes since the peer's current", ids(G2, &[(1, G1)], &[G4]),
            ids(G1, &[], &[]),
            SOURCE_BITMAP, Rule::BitmapSelf),
        ("bitmaps point at each other's currents", ids(G1, &[(1, G2)], &[]),
            ids(G2, &[(0, G1)], &[]),
            MANUAL, Rule::BitmapContradiction),
        ("our current is in the peer's history", ids(G1, &[], &[]), ids(G3, &[], &[G2, G1 | 1]),
            TARGET_FULL, Rule::HistoryPeer),
        ("the peer's current is in our history", ids(G3, &[(2, G1)], &[G2]), ids(G2, &[], &[]),
            SOURCE_FULL, Rule::HistorySelf),
        ("histories hold each other's currents", ids(G1, &[], &[G2]), ids(G2, &[], &[G1]),
            MANUAL, Rule::HistoryContradiction),
        ("both count changes since the same generation", ids(G2, &[(1, G1 | 1)], &[]),
            ids(G3, &[(0, G1)], &[]),
            AUTO, Rule::BitmapBoth),
        ("only an older generation is shared", ids(G2, &[(1, G4)], &[G1]),
            ids(G3, &[], &[G4 | 1, G1]),
            MANUAL, Rule::HistoryBoth),
        ("a generation kept in a third node's bitmap slot on one side and in the history of \
          the other is shared", ids(G2, &[(2, G1 | 1)], &[G4]), ids(G3, &[], &[G1]),
            MANUAL, Rule::HistoryBoth),
        ("nothing shared", ids(G1, &[(1, G3)], &[G4]), ids(G2, &[], &[]),
            SyncDecision::Unrelated, Rule::UnrelatedData),
        ("empty bitmaps are not a shared generation", ids(G1, &[], &[]), ids(G2, &[], &[]),
            SyncDecision::Unrelated, Rule::UnrelatedData),
        ("a bitmap identifier in another node's slot does not count", ids(G1, &[], &[]),
            ids(G2, &[(2, G1)], &[]),
            SyncDecision::Unrelated, Rule::UnrelatedData),
    ];
    for (name, local, peer, decision, rule) in rows {
        let expected = Handshake {
            decision: *decision,
            rule: *rule,
        };
        let pair = nodes(0, 1);
        assert_eq!(
            compare(local, peer, pair),
            expected,
            "{name}: seen from node 0"
        );
        let mirrored = compare(peer, local, pair.mirrored());
        assert_eq!(mirrored, expected.mirrored(), "{name}: seen from node 1");
    }
}

/// The rules are tried in order: an earlier rule wins when several apply.
#[test]
fn earlier_rules_take_precedence() {
    // Equal currents win over a bitmap relation that would also hold.
    check(
        &ids(G1, &[(1, G1)], &[]),
        &ids(G1, &[], &[]),
        SyncDecision::NoSync,
        Rule::EqualCurrent,
    );
    // A bitmap relation wins over a history relation (bitmap resync instead of full).
    check(
        &ids(G1, &[], &[]),
        &ids(G2, &[(0, G1)], &[G1]),
        TARGET_BITMAP,
        Rule::BitmapPeer,
    );
    // A history relation wins over a shared bitmap generation.
    check(
        &ids(G2, &[(1, G1)], &[G3]),
        &ids(G3, &[(0, G1)], &[]),
        SOURCE_FULL,
        Rule::HistorySelf,
    );
}

fn absent(peers: &[u8]) -> NodeSet {
    peers
        .iter()
        .fold(NodeSet::EMPTY, |set, &id| set.with(node(id)))
}

fn new_current(ids: &mut GenerationIds, random: u64, role: Role, absent_peers: &[u8]) {
    ids.new_current(NewCurrent {
        random,
        role,
        absent_peers: absent(absent_peers),
    });
}

fn adopt(target: &mut GenerationIds, source: &GenerationIds, local: u8, source_id: u8) {
    let adoption = Adoption {
        local: node(local),
        source: node(source_id),
        role: Role::Secondary,
    };
    target.adopt_source(source, adoption);
}

/// A Primary writes while its peer is away; on reconnect the peer gets only the bitmap, and
/// after the resync both are equal again.
#[test]
fn lifecycle_disconnect_write_reconnect_resync() {
    let mut alice = ids(G1 | 1, &[], &[]);
    let mut bob = ids(G1, &[], &[]);
    check(&alice, &bob, SyncDecision::NoSync, Rule::EqualCurrent);

    new_current(&mut alice, G2, Role::Primary, &[1]);
    assert_eq!(
        alice.bitmap_uuid(node(1)),
        G1 | 1,
        "old current anchors bob's bitmap"
    );
    assert_eq!(alice.current, G2 | 1, "new current marked primary");
    check(&alice, &bob, SOURCE_BITMAP, Rule::BitmapSelf);

    alice.clear_bitmap_uuid(node(1));
    adopt(&mut bob, &alice, 1, 0);
    assert_eq!(alice.bitmap_uuid(node(1)), 0);
    assert_eq!(
        alice.history[0],
        G1 | 1,
        "cleared bitmap identifier moves to history"
    );
    assert_eq!(
        bob.current, G2,
        "target adopts the current without the primary bit"
    );
    assert_eq!(bob.history, alice.history);
    check(&alice, &bob, SyncDecision::NoSync, Rule::EqualCurrent);
}

/// Both sides write while apart: the bitmap identifiers meet, and the primary bits tell which
/// side was Primary when they split.
#[test]
fn lifecycle_split_brain() {
    let mut alice = ids(G1 | 1, &[], &[]);
    let mut bob = ids(G1, &[], &[]);
    new_current(&mut alice, G2, Role::Primary, &[1]);
    new_current(&mut bob, G3, Role::Primary, &[0]);
    check(&alice, &bob, AUTO, Rule::BitmapBoth);
    assert_eq!(alice.bitmap_uuid(node(1)) & UUID_PRIMARY, UUID_PRIMARY);
    assert_eq!(
        bob.bitmap_uuid(node(0)) & UUID_PRIMARY,
        0,
        "bob became primary after"
    );

    // Alice later clears her bitmap for bob (new-current-uuid --clear-bitmap): only the
    // history links them now, and no bitmap covers the divergence.
    alice.clear_bitmap_uuid(node(1));
    bob.clear_bitmap_uuid(node(0));
    check(&alice, &bob, MANUAL, Rule::HistoryBoth);
}

/// A victim that adopts the survivor's identifiers forgets its own diverged generation, so a
/// third node holding that generation is not mistaken for an ancestor.
#[test]
fn adopted_target_forgets_discarded_generation() {
    let alice = ids(G2, &[(1, G1), (2, G3)], &[G3]);
    let mut bob = ids(G4, &[(0, G1)], &[G1]);
    bob.flags.crashed_primary = true;
    bob.flags.discard_my_data = true;
    adopt(&mut bob, &alice, 1, 0);
    assert_eq!(bob.current, G2);
    assert_eq!(bob.bitmap_uuid(node(0)), 0, "in sync with the source");
    assert_eq!(bob.bitmap_uuid(node(1)), 0, "own slot unused");
    assert_eq!(
        bob.bitmap_uuid(node(2)),
        G3,
        "third node's slot from the source"
    );
    assert_eq!(bob.history, alice.history);
    assert_eq!(bob.flags, GenerationFlags::default());
    // Charlie was with bob in the diverged partition.
    let charlie = ids(G4 | 1, &[], &[]);
    let seen = compare(&bob, &charlie, nodes(1, 2));
    assert_eq!(
        seen.decision,
        SyncDecision::Unrelated,
        "bob's old data is no ancestor"
    );
}

/// Three nodes (rotate.rs): alice (Primary) loses charlie and starts a new generation; bob,
/// in sync with her, adopts it and anchors his own bitmap for charlie at the old one. Alice and
/// bob stay equal; charlie, back, is a bitmap target of either; a repeated Rotate is a no-op.
#[test]
fn a_secondary_follows_its_primarys_new_generation() {
    let mut alice = ids(G1 | 1, &[], &[]);
    let mut bob = ids(G1 | 1, &[], &[]);
    let charlie = ids(G1 | 1, &[], &[]);
    new_current(&mut alice, G2, Role::Primary, &[2]);
    bob.adopt_current(alice.current, absent(&[2]));
    assert_eq!(bob.current, alice.current, "bob follows alice");
    assert_eq!(
        bob.bitmap_uuid(node(2)),
        G1 | 1,
        "bob's bitmap for charlie counts from the old generation"
    );
    check(&alice, &bob, SyncDecision::NoSync, Rule::EqualCurrent);
    assert_eq!(compare(&bob, &charlie, nodes(1, 2)).decision, SOURCE_BITMAP);
    assert_eq!(
        compare(&alice, &charlie, nodes(0, 2)).decision,
        SOURCE_BITMAP
    );
    let before = bob.clone();
    bob.adopt_current(alice.current, absent(&[2]));
    assert_eq!(bob, before, "the same generation twice changes nothing");
    // Charlie still connected to bob when alice rotated: the old generation goes to history,
    // so charlie is later seen as behind (a full sync), never as unrelated.
    let mut bob2 = ids(G1 | 1, &[], &[]);
    bob2.adopt_current(alice.current, absent(&[]));
    assert_eq!(bob2.history[0], G1 | 1);
    assert_eq!(compare(&bob2, &charlie, nodes(1, 2)).decision, SOURCE_FULL);
}

#[test]
fn new_current_keeps_older_bitmap_and_history() {
    let mut alice = ids(G1, &[], &[]);
    new_current(&mut alice, G2, Role::Primary, &[1]);
    new_current(&mut alice, G3, Role::Primary, &[1, 2]);
    assert_eq!(alice.bitmap_uuid(node(1)), G1, "bob keeps the older anchor");
    assert_eq!(
        alice.bitmap_uuid(node(2)),
        G2 | 1,
        "charlie starts at the old current"
    );
    assert_eq!(
        alice.history[0], 0,
        "old current anchored a bitmap: history untouched"
    );
    new_current(&mut alice, G4, Role::Secondary, &[1, 2]);
    assert_eq!(
        alice.history[0],
        G3 | 1,
        "old current anchored nothing: into history"
    );
    assert_eq!(alice.current, G4, "secondary: no primary bit");
}

#[test]
fn new_current_avoids_reserved_and_held_values() {
    let mut fresh = GenerationIds::just_created();
    let rows: &[(&str, u64)] = &[
        ("zero", 0),
        ("one (zero with primary bit)", 1),
        ("just created", UUID_JUST_CREATED),
        ("just created with primary bit", UUID_JUST_CREATED | 1),
    ];
    for (name, random) in rows {
        let mut ids = fresh.clone();
        new_current(&mut ids, *random, Role::Secondary, &[]);
        let bare = ids.current & !UUID_PRIMARY;
        assert!(
            bare != 0 && bare != UUID_JUST_CREATED,
            "{name}: got {bare:#x}"
        );
    }
    fresh = ids(G1, &[(1, G2)], &[G3]);
    for held in [G1, G2, G3, G1 | 1] {
        let mut ids = fresh.clone();
        new_current(&mut ids, held, Role::Secondary, &[]);
        for old in [G1, G2, G3] {
            assert_ne!(
                ids.current & !UUID_PRIMARY,
                old,
                "random {held:#x} reused {old:#x}"
            );
        }
    }
}

#[test]
fn history_is_bounded_and_deduplicated() {
    let mut ids = GenerationIds::just_created();
    ids.current = G1;
    let total = u64::try_from(HISTORY_SLOTS_MAX).unwrap_or(u64::MAX) + 3;
    for step in 0..total {
        // Secondary with no absent peers: every old current goes to history.
        new_current(&mut ids, 0x100 * (step + 1), Role::Secondary, &[]);
    }
    assert!(ids.history.iter().all(|&uuid| uuid != 0), "history full");
    assert_eq!(ids.history[0], 0x100 * (total - 1), "newest first");
    assert!(!ids.history.contains(&G1), "oldest dropped");

    let before = ids.history;
    ids.bitmap[3] = before[5] | 1;
    ids.clear_bitmap_uuid(node(3));
    assert_eq!(ids.history, before, "already in history: not pushed again");
    ids.clear_bitmap_uuid(node(4));
    assert_eq!(ids.history, before, "empty slot: nothing pushed");
}

#[test]
fn log_lines() {
    let mut local = ids(0xE54E_3151_3A64_A2EE, &[], &[0x35BC_9714_2AF7_A8A4]);
    local.flags = GenerationFlags::from_bits(3);
    let line = HandshakeLog {
        side: Side::Local,
        ids: &local,
        bitmap_slot: node(1),
        bits: 1266688,
    };
    assert_eq!(
        line.to_string(),
        "self E54E31513A64A2EE:0000000000000000:35BC97142AF7A8A4:0000000000000000 \
         bits:1266688 flags:3"
    );
    let peer = ids(
        0x591D_9E9C_A26B_4F98,
        &[(0, 0x66E6_7F43_AB59_AB30)],
        &[1, 2],
    );
    let line = HandshakeLog {
        side: Side::Peer,
        ids: &peer,
        bitmap_slot: node(0),
        bits: 0,
    };
    assert_eq!(
        line.to_string(),
        "peer 591D9E9CA26B4F98:66E67F43AB59AB30:0000000000000001:0000000000000002 bits:0 flags:0"
    );
    let handshake = Handshake {
        decision: SyncDecision::Unrelated,
        rule: Rule::HistoryBoth,
    };
    assert_eq!(
        handshake.to_string(),
        "uuid_compare()=unrelated-data by rule=history-both"
    );
}

#[test]
fn flags_round_trip() {
    for bits in 0..4 {
        assert_eq!(GenerationFlags::from_bits(bits).bits(), bits);
    }
    assert_eq!(
        GenerationFlags::from_bits(0xF0).bits(),
        0,
        "unknown bits ignored"
    );
}

#[test]
fn bad_node_ids_are_errors() {
    let max = u8::try_from(NODE_SLOTS_MAX).unwrap_or(u8::MAX);
    assert_eq!(
        NodeId::new(max),
        Err(SyncError::NodeIdOutOfRange { node_id: max })
    );
    assert!(NodeId::new(max - 1).is_ok());
    assert_eq!(
        HandshakeNodes::new(node(3), node(3)),
        Err(SyncError::SameNodeId { node_id: 3 })
    );
}

#[test]
fn node_set_members() {
    let set = absent(&[31, 0, 7]);
    let members: Vec<u8> = set.iter().map(NodeId::get).collect();
    assert_eq!(members, vec![0, 7, 31]);
    assert!(!set.contains(node(1)));
}

/// Identifiers drawn from a small pool so that the rules' equalities actually happen.
fn pool_uuid() -> impl Strategy<Value = u64> {
    prop::sample::select(vec![0u64, 4, 5, G1, G1 | 1, G2, G3])
}

fn arbitrary_ids() -> impl Strategy<Value = GenerationIds> {
    (
        pool_uuid(),
        prop::collection::vec(pool_uuid(), 4),
        prop::collection::vec(pool_uuid(), 3),
        any::<(bool, bool)>(),
    )
        .prop_map(
            |(current, bitmaps, history, (crashed_primary, discard_my_data))| {
                let mut ids = GenerationIds::just_created();
                ids.current = current;
                ids.bitmap[..bitmaps.len()].copy_from_slice(&bitmaps);
                ids.history[..history.len()].copy_from_slice(&history);
                ids.flags = GenerationFlags {
                    crashed_primary,
                    discard_my_data,
                    ..GenerationFlags::default()
                };
                ids
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4096))]

    /// compare(a, b) and compare(b, a) are mirror images: Source <-> Target, the rest equal.
    #[test]
    fn compare_is_a_mirror(
        a in arbitrary_ids(),
        b in arbitrary_ids(),
        (x, y) in (0u8..4, 0u8..4).prop_filter("distinct", |(x, y)| x != y),
    ) {
        let pair = nodes(x, y);
        let forward = compare(&a, &b, pair);
        let backward = compare(&b, &a, pair.mirrored());
        prop_assert_eq!(backward, forward.mirrored());
    }

    /// Equal identifiers (apart from primary bits) never sync unless a crash says so.
    #[test]
    fn same_generation_never_moves_data_without_a_crash(
        mut a in arbitrary_ids(),
        primary in any::<bool>(),
    ) {
        a.flags.crashed_primary = false;
        let mut b = a.clone();
        b.current ^= u64::from(primary);
        let handshake = compare(&a, &b, nodes(0, 1));
        prop_assert_eq!(handshake.decision, SyncDecision::NoSync);
    }

    /// A fresh generation is never one the node already holds, whatever the randomness.
    #[test]
    fn new_current_is_always_fresh(
        a in arbitrary_ids(),
        random in prop_oneof![pool_uuid(), any::<u64>()],
    ) {
        let mut b = a.clone();
        b.new_current(NewCurrent { random, role: Role::Primary, absent_peers: NodeSet::EMPTY });
        let bare = b.current & !UUID_PRIMARY;
        prop_assert!(bare != 0 && bare != UUID_JUST_CREATED);
        prop_assert!(!a.knows(bare));
    }
}

/// A split brain whose resolving resync was cut before the victim got `SyncStart`: the
/// source already put a fresh sync identifier in its bitmap slot and the old one (the common
/// generation) in its history. Still a split brain (so discard-my-data can resolve it), never
/// "unrelated data".
#[test]
fn a_lost_sync_start_after_a_split_brain_is_still_a_split_brain() {
    // alice (source): current G2, fresh sync identifier G4, the common G1 in history.
    let alice = ids(G2, &[(1, G4)], &[G1 | 1]);
    // bob (victim): its own G3, still counting since G1 for alice.
    let bob = ids(G3, &[(0, G1)], &[]);
    check(&alice, &bob, AUTO, Rule::BitmapBoth);
    // Without the shared generation it stays unrelated.
    let stranger = ids(G3, &[(0, 0x5555_5555_5555_5550)], &[]);
    check(
        &alice,
        &stranger,
        SyncDecision::Unrelated,
        Rule::UnrelatedData,
    );
}

/// The same, after the source wrote on: a Primary that lost a peer it shared its generation
/// with starts a new one before writing, so the common generation is no longer its newest
/// history entry. Still a split brain.
#[test]
fn a_lost_sync_start_is_a_split_brain_also_after_further_generations() {
    // alice: current G5 (written after the cut), sync identifier G4, history G2 (the
    // generation of the resolution) then the common G1.
    let alice = ids(G5, &[(1, G4)], &[G2, G1 | 1]);
    let bob = ids(G3, &[(0, G1)], &[]);
    check(&alice, &bob, AUTO, Rule::BitmapBoth);
}

/// `descends_from`: an ancestor is a bitmap identifier or in the history, never the current
/// (the primary bit ignored); a fresh disk's marker and 0 are nobody's ancestors.
#[test]
fn descends_from_finds_ancestors_in_bitmaps_and_history_only() {
    let newer = ids(G3 | UUID_PRIMARY, &[(1, G2)], &[G1]);
    assert!(newer.descends_from(G2), "a bitmap identifier");
    assert!(
        newer.descends_from(G1 | UUID_PRIMARY),
        "in the history, primary bit ignored"
    );
    assert!(!newer.descends_from(G3), "the current itself is not behind");
    assert!(!newer.descends_from(G4), "an unknown generation");
    assert!(!newer.descends_from(0));
    assert!(
        !ids(G3, &[], &[JC]).descends_from(JC),
        "a fresh disk is nobody's descendant"
    );
}

/// A sync target learns its source's ancestors (bitmap identifiers and history, not the
/// source's current, not its own sync identifier); a node still on one of them is then
/// behind the target by the history rules, not unrelated to it.
#[test]
fn a_sync_target_learns_its_source_s_ancestors() {
    let sync = G5;
    let source = ids(G3, &[(0, G2), (2, sync)], &[G1]);
    let mut target = ids(sync, &[], &[]);
    target.learn_source_ancestors(&source);
    assert!(
        target.in_history(G2) && target.in_history(G1),
        "{:?}",
        target.history
    );
    assert!(
        !target.in_history(G3),
        "the source's current is not an ancestor of a partial copy"
    );
    assert!(!target.in_history(sync), "nor our own current");
    let old_primary = ids(G2 | UUID_PRIMARY, &[], &[G1]);
    let seen = compare(&target, &old_primary, nodes(2, 0));
    assert_eq!(
        seen.decision,
        SyncDecision::Source(Transfer::Full),
        "the old Primary is behind: {seen}"
    );
    let same_generation = ids(G3, &[], &[G2, G1]);
    let seen = compare(&target, &same_generation, nodes(2, 1));
    assert_eq!(
        seen.rule,
        Rule::HistoryBoth,
        "a shared lineage: a split brain for the administrator, never a silent overwrite: {seen}"
    );
}

/// A sync target's resync goal is its source's current, follows the source's rotations, and
/// is gone once the target has the data (adopts the source) or starts or takes a generation
/// of its own; [`GenerationIds::includes`] finds a generation in the current, a bitmap slot
/// or the history.
#[test]
fn the_resync_goal_follows_the_source_until_the_target_has_its_data() {
    let source = ids(G3 | UUID_PRIMARY, &[(2, G5)], &[G1]);
    let mut target = ids(G5, &[], &[]);
    target.learn_source_ancestors(&source);
    assert_eq!(target.resync_goal, G3 | UUID_PRIMARY);
    let rotated = ids(G4 | UUID_PRIMARY, &[(2, G5)], &[G3, G1]);
    target.learn_source_ancestors(&rotated);
    assert_eq!(
        target.resync_goal,
        G4 | UUID_PRIMARY,
        "the source's new generation"
    );
    let mut adopted = target.clone();
    adopt(&mut adopted, &rotated, 2, 0);
    assert_eq!(adopted.resync_goal, 0, "the resync finished");
    let mut own = target.clone();
    new_current(&mut own, 0x1234_5678, Role::Primary, &[0]);
    assert_eq!(
        own.resync_goal, 0,
        "a generation of its own (primary --force)"
    );
    assert!(rotated.includes(G4) && rotated.includes(G5) && rotated.includes(G3 | UUID_PRIMARY));
    assert!(!rotated.includes(G2) && !rotated.includes(0));
}
