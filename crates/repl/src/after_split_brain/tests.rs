//! Tests of the after-split-brain policies (drbd-semantics.md §1, after-sb-*): a table per
//! number of Primaries, each row also checked from the peer's side, and a property test that
//! the two sides never both discard and never both keep.

use proptest::prelude::*;

use super::*;

fn node(id: u8) -> NodeId {
    match NodeId::new(id) {
        Ok(node) => node,
        Err(error) => panic!("test node id {id}: {error}"),
    }
}

fn side(node_id: u8, role: Role, changed_blocks: u64) -> SideFacts {
    SideFacts {
        node_id: node(node_id),
        role,
        changed_blocks,
        discard_my_data: false,
    }
}

/// Node 0 (local) against node 1 (peer), auto-recoverable, younger primary unknown.
fn facts(local: (Role, u64), peer: (Role, u64)) -> SplitBrainFacts {
    SplitBrainFacts {
        local: side(0, local.0, local.1),
        peer: side(1, peer.0, peer.1),
        younger_primary: None,
        auto_recoverable: true,
    }
}

fn younger(mut facts: SplitBrainFacts, side: Side) -> SplitBrainFacts {
    facts.younger_primary = Some(side);
    facts
}

/// Whether two sides' resolutions fit together: both disconnect, or exactly one discards.
fn consistent(mine: Resolution, theirs: Resolution) -> bool {
    match (mine, theirs) {
        (Resolution::Disconnect, Resolution::Disconnect) => true,
        (Resolution::DiscardRemote, other) => other.discards_local(),
        (other, Resolution::DiscardRemote) => other.discards_local(),
        _ => false,
    }
}

fn zero(policy: AfterSb0Pri) -> SplitBrainPolicies {
    SplitBrainPolicies {
        zero_primaries: policy,
        ..SplitBrainPolicies::default()
    }
}

fn one(policy: AfterSb1Pri, zero: AfterSb0Pri) -> SplitBrainPolicies {
    SplitBrainPolicies {
        zero_primaries: zero,
        one_primary: policy,
        ..Default::default()
    }
}

fn two(policy: AfterSb2Pri, zero: AfterSb0Pri) -> SplitBrainPolicies {
    SplitBrainPolicies {
        zero_primaries: zero,
        two_primaries: policy,
        ..Default::default()
    }
}

type Row = (
    &'static str,
    SplitBrainPolicies,
    SplitBrainFacts,
    Resolution,
);

#[track_caller]
fn check_rows(rows: &[Row]) {
    for (name, policies, facts, expected) in rows {
        let mine = resolve_split_brain(facts, policies);
        assert_eq!(mine, *expected, "{name}");
        let theirs = resolve_split_brain(&facts.mirrored(), policies);
        assert!(
            consistent(mine, theirs),
            "{name}: {mine:?} here, {theirs:?} on the peer"
        );
    }
}

const S: Role = Role::Secondary;
const P: Role = Role::Primary;
use AfterSb0Pri as Zero;
use Resolution::{CallPriLostAfterSb, DiscardLocal, DiscardRemote, Disconnect};

#[test]
fn after_sb_0pri() {
    let mut higher_id = facts((S, 0), (S, 0));
    higher_id.local.node_id = node(2);
    #[rustfmt::skip]
    let rows: &[Row] = &[
        ("disconnect", zero(Zero::Disconnect), facts((S, 1), (S, 9)), Disconnect),
        ("younger: we are", zero(Zero::DiscardYoungerPrimary),
            younger(facts((S, 9), (S, 1)), Side::Local), DiscardLocal),
        ("younger: peer is", zero(Zero::DiscardYoungerPrimary),
            younger(facts((S, 1), (S, 9)), Side::Peer), DiscardRemote),
        ("younger unknown: least changes", zero(Zero::DiscardYoungerPrimary),
            facts((S, 1), (S, 9)), DiscardLocal),
        ("older: peer is", zero(Zero::DiscardOlderPrimary),
            younger(facts((S, 1), (S, 9)), Side::Local), DiscardRemote),
        ("older: we are", zero(Zero::DiscardOlderPrimary),
            younger(facts((S, 9), (S, 1)), Side::Peer), DiscardLocal),
        ("older unknown: least changes", zero(Zero::DiscardOlderPrimary),
            facts((S, 9), (S, 1)), DiscardRemote),
        ("zero changes here", zero(Zero::DiscardZeroChanges), facts((S, 0), (S, 7)), DiscardLocal),
        ("zero changes there", zero(Zero::DiscardZeroChanges), facts((S, 7), (S, 0)),
            DiscardRemote),
        ("changes on both", zero(Zero::DiscardZeroChanges), facts((S, 3), (S, 7)), Disconnect),
        ("no changes anywhere: lower id keeps", zero(Zero::DiscardZeroChanges),
            facts((S, 0), (S, 0)), DiscardRemote),
        ("no changes anywhere: higher id discards", zero(Zero::DiscardZeroChanges),
            higher_id, DiscardLocal),
        ("fewer here", zero(Zero::DiscardLeastChanges), facts((S, 3), (S, 7)), DiscardLocal),
        ("fewer there", zero(Zero::DiscardLeastChanges), facts((S, 7), (S, 3)), DiscardRemote),
        ("equal changes: tie", zero(Zero::DiscardLeastChanges), facts((S, 5), (S, 5)),
            DiscardRemote),
        ("named node is us", zero(Zero::DiscardNode(node(0))), facts((S, 1), (S, 9)), DiscardLocal),
        ("named node is peer", zero(Zero::DiscardNode(node(1))), facts((S, 9), (S, 1)),
            DiscardRemote),
        ("named node is elsewhere", zero(Zero::DiscardNode(node(5))), facts((S, 1), (S, 9)),
            Disconnect),
    ];
    check_rows(rows);
}

#[test]
fn after_sb_1pri() {
    use AfterSb1Pri as One;
    let least = Zero::DiscardLeastChanges;
    #[rustfmt::skip]
    let rows: &[Row] = &[
        ("disconnect", one(One::Disconnect, least), facts((P, 1), (S, 9)), Disconnect),
        ("consensus: 0pri discards the secondary (us)", one(One::Consensus, least),
            facts((S, 1), (P, 9)), DiscardLocal),
        ("consensus: 0pri discards the secondary (peer)", one(One::Consensus, least),
            facts((P, 9), (S, 1)), DiscardRemote),
        ("consensus: 0pri would discard the primary", one(One::Consensus, least),
            facts((P, 1), (S, 9)), Disconnect),
        ("consensus: 0pri undecided", one(One::Consensus, Zero::Disconnect),
            facts((S, 1), (P, 9)), Disconnect),
        ("violently: the primary loses", one(One::ViolentlyAs0p, least),
            facts((P, 1), (S, 9)), DiscardLocal),
        ("discard-secondary: we are", one(One::DiscardSecondary, Zero::Disconnect),
            facts((S, 9), (P, 1)), DiscardLocal),
        ("discard-secondary: peer is", one(One::DiscardSecondary, Zero::Disconnect),
            facts((P, 1), (S, 9)), DiscardRemote),
        ("discard-secondary: unknown peer role counts as secondary",
            one(One::DiscardSecondary, Zero::Disconnect), facts((P, 1), (Role::Unknown, 9)),
            DiscardRemote),
        ("call-pri-lost: the primary (us) loses", one(One::CallPriLostAfterSb, least),
            facts((P, 1), (S, 9)), CallPriLostAfterSb),
        ("call-pri-lost: the primary (peer) loses", one(One::CallPriLostAfterSb, least),
            facts((S, 9), (P, 1)), DiscardRemote),
        ("call-pri-lost: the secondary loses", one(One::CallPriLostAfterSb, least),
            facts((S, 1), (P, 9)), DiscardLocal),
    ];
    check_rows(rows);
}

#[test]
fn after_sb_2pri() {
    use AfterSb2Pri as Two;
    let least = Zero::DiscardLeastChanges;
    #[rustfmt::skip]
    let rows: &[Row] = &[
        ("disconnect", two(Two::Disconnect, least), facts((P, 1), (P, 9)), Disconnect),
        ("violently", two(Two::ViolentlyAs0p, least), facts((P, 1), (P, 9)), DiscardLocal),
        ("violently, 0pri undecided", two(Two::ViolentlyAs0p, Zero::Disconnect),
            facts((P, 1), (P, 9)), Disconnect),
        ("call-pri-lost: we lose", two(Two::CallPriLostAfterSb, least),
            facts((P, 1), (P, 9)), CallPriLostAfterSb),
        ("call-pri-lost: peer loses", two(Two::CallPriLostAfterSb, least),
            facts((P, 9), (P, 1)), DiscardRemote),
    ];
    check_rows(rows);
}

#[test]
fn manual_recovery_and_unrecoverable_split_brain() {
    let violent = SplitBrainPolicies {
        zero_primaries: Zero::DiscardLeastChanges,
        one_primary: AfterSb1Pri::ViolentlyAs0p,
        two_primaries: AfterSb2Pri::ViolentlyAs0p,
    };
    let mut ours = facts((S, 9), (P, 1));
    ours.local.discard_my_data = true;
    let mut theirs = facts((S, 1), (S, 9));
    theirs.peer.discard_my_data = true;
    let mut both = facts((S, 1), (S, 9));
    both.local.discard_my_data = true;
    both.peer.discard_my_data = true;
    let mut unrecoverable = facts((S, 1), (S, 9));
    unrecoverable.auto_recoverable = false;
    let mut manual_unrecoverable = ours;
    manual_unrecoverable.auto_recoverable = false;
    #[rustfmt::skip]
    let rows: &[Row] = &[
        ("--discard-my-data here", SplitBrainPolicies::default(), ours, DiscardLocal),
        ("--discard-my-data there", SplitBrainPolicies::default(), theirs, DiscardRemote),
        ("--discard-my-data on both", violent, both, Disconnect),
        ("history-both is never automatic", violent, unrecoverable, Disconnect),
        ("history-both yields to --discard-my-data", SplitBrainPolicies::default(),
            manual_unrecoverable, DiscardLocal),
    ];
    check_rows(rows);
}

#[test]
fn younger_primary_from_bitmap_identifiers() {
    let rows: &[(u64, u64, Option<Side>)] = &[
        (0x10, 0x21, Some(Side::Local)),
        (0x11, 0x20, Some(Side::Peer)),
        (0x11, 0x21, None),
        (0x10, 0x20, None),
    ];
    for &(local, peer, expected) in rows {
        assert_eq!(
            younger_primary(local, peer),
            expected,
            "{local:#x} {peer:#x}"
        );
        assert_eq!(
            younger_primary(peer, local),
            expected.map(Side::other),
            "mirrored"
        );
    }
}

fn role() -> impl Strategy<Value = Role> {
    prop::sample::select(vec![Role::Primary, Role::Secondary, Role::Unknown])
}

fn side_facts(node_id: u8) -> impl Strategy<Value = SideFacts> {
    (
        role(),
        prop_oneof![Just(0u64), Just(5), 0u64..8, any::<u64>()],
        any::<bool>(),
    )
        .prop_map(move |(role, changed_blocks, discard_my_data)| SideFacts {
            node_id: node(node_id),
            role,
            changed_blocks,
            discard_my_data,
        })
}

fn arbitrary_facts() -> impl Strategy<Value = SplitBrainFacts> {
    let younger = prop::option::of(prop::sample::select(vec![Side::Local, Side::Peer]));
    ((0u8..3, 3u8..6), any::<bool>(), younger, any::<bool>()).prop_flat_map(
        |((x, y), swap, younger_primary, auto_recoverable)| {
            let (a, b) = if swap { (y, x) } else { (x, y) };
            (side_facts(a), side_facts(b)).prop_map(move |(local, peer)| SplitBrainFacts {
                local,
                peer,
                younger_primary,
                auto_recoverable,
            })
        },
    )
}

fn arbitrary_policies() -> impl Strategy<Value = SplitBrainPolicies> {
    let zero = prop::sample::select(vec![
        Zero::Disconnect,
        Zero::DiscardYoungerPrimary,
        Zero::DiscardOlderPrimary,
        Zero::DiscardZeroChanges,
        Zero::DiscardLeastChanges,
        Zero::DiscardNode(node(0)),
        Zero::DiscardNode(node(4)),
        Zero::DiscardNode(node(31)),
    ]);
    let one = prop::sample::select(vec![
        AfterSb1Pri::Disconnect,
        AfterSb1Pri::Consensus,
        AfterSb1Pri::ViolentlyAs0p,
        AfterSb1Pri::DiscardSecondary,
        AfterSb1Pri::CallPriLostAfterSb,
    ]);
    let two = prop::sample::select(vec![
        AfterSb2Pri::Disconnect,
        AfterSb2Pri::ViolentlyAs0p,
        AfterSb2Pri::CallPriLostAfterSb,
    ]);
    (zero, one, two).prop_map(
        |(zero_primaries, one_primary, two_primaries)| SplitBrainPolicies {
            zero_primaries,
            one_primary,
            two_primaries,
        },
    )
}

proptest! {
    /// Both sides run `resolve_split_brain`; never both discard, never both keep.
    #[test]
    fn sides_agree(facts in arbitrary_facts(), policies in arbitrary_policies()) {
        let mine = resolve_split_brain(&facts, &policies);
        let theirs = resolve_split_brain(&facts.mirrored(), &policies);
        prop_assert!(consistent(mine, theirs), "{:?} here, {:?} there", mine, theirs);
    }

    /// Only a local Primary is asked to run pri-lost-after-sb, and consensus or
    /// discard-secondary never discard a Primary unless the administrator said so.
    #[test]
    fn primaries_are_protected(facts in arbitrary_facts(), policies in arbitrary_policies()) {
        let mine = resolve_split_brain(&facts, &policies);
        if mine == CallPriLostAfterSb {
            prop_assert_eq!(facts.local.role, Role::Primary);
        }
        let gentle = matches!(
            policies.one_primary,
            AfterSb1Pri::Consensus | AfterSb1Pri::DiscardSecondary | AfterSb1Pri::Disconnect
        );
        let one_primary = (facts.local.role == P) != (facts.peer.role == P);
        let manual = facts.local.discard_my_data || facts.peer.discard_my_data;
        if gentle && one_primary && !manual && mine.discards_local() {
            prop_assert_ne!(facts.local.role, Role::Primary);
        }
    }
}
