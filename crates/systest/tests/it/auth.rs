//! Peer authentication (`cram-hmac-alg` + `shared-secret`): nodes whose secrets differ never
//! reach Connected and say so in their logs, naming the peer; equal secrets connect and
//! replicate.

use std::time::Duration;

use crate::cluster::{Cluster, Spec, NODE_NAMES, RESOURCE};
use crate::nbd_client;
use crate::tools::{fresh_seed, Rng};

/// How long the nodes keep trying in the wrong-secret test (connect-int is 1 s, so this is
/// several attempts).
const NEVER_CONNECTED_FOR: Duration = Duration::from_secs(3);
/// How long until both logs say why.
const LOG_DEADLINE: Duration = Duration::from_secs(10);

fn with_secrets(secret_alice: &str, secret_bob: &str) -> Spec {
    Spec::two_nodes('C')
        .net_line(0, "cram-hmac-alg sha256;")
        .net_line(0, &format!("shared-secret \"{secret_alice}\";"))
        .net_line(1, "cram-hmac-alg sha256;")
        .net_line(1, &format!("shared-secret \"{secret_bob}\";"))
}

/// The first log line that says authentication failed and names `peer`.
fn auth_failure_line(log: &str, peer: &str) -> Option<String> {
    log.lines()
        .find(|line| line.to_lowercase().contains("authentication failed") && line.contains(peer))
        .map(str::to_string)
}

/// drbd-semantics.md §1 table, `cram-hmac-alg + shared-secret`: peer authentication by
/// challenge-response. A peer that cannot prove it knows the secret is never Connected, and
/// the operator learns why from the log of each side.
#[test]
fn wrong_shared_secret_never_connects_and_is_logged() {
    let cluster = Cluster::start(with_secrets("alpha-secret-1", "beta-secret-2"));
    let never_connected = || {
        (0..2).all(|index| {
            let peer = NODE_NAMES[1 - index];
            cluster.status(index).connection_state(peer) != "Connected"
        })
    };
    cluster.hold_for(
        "neither node reports Connected",
        NEVER_CONNECTED_FOR,
        never_connected,
    );
    for (index, peer) in [(0, NODE_NAMES[1]), (1, NODE_NAMES[0])] {
        let what = format!(
            "{}'s log says authentication with {peer} failed",
            cluster.name(index)
        );
        cluster.wait_until(&what, LOG_DEADLINE, || {
            assert!(
                never_connected(),
                "the nodes connected although their secrets differ"
            );
            auth_failure_line(&cluster.log(index), peer).is_some()
        });
    }
}

/// The positive side: with equal secrets the nodes authenticate, connect and replicate.
#[test]
fn equal_shared_secret_connects_and_replicates() {
    let cluster = Cluster::with_primary(with_secrets("same-secret-3", "same-secret-3"));
    let seed = fresh_seed();
    eprintln!("data from seed {seed} (SYSTEST_SEED={seed} replays it)");
    let mut client =
        nbd_client::open(&cluster.nbd_socket(0), RESOURCE).expect("the Primary refused NBD_OPT_GO");
    assert_eq!(
        client.size,
        cluster.disk_bytes(),
        "the export size is not the backing file size"
    );
    let data = Rng::new(seed).bytes(64 << 10);
    let errno = client.write(1 << 20, &data);
    assert_eq!(errno, 0, "the write failed with errno {errno}");
    assert!(
        client.read(1 << 20, 64 << 10) == data,
        "the Primary read back other data than written"
    );
    client.disconnect();
    cluster.wait_identical(0, 1, LOG_DEADLINE);
    for index in 0..2 {
        assert!(
            auth_failure_line(&cluster.log(index), NODE_NAMES[1 - index]).is_none(),
            "{} logged an authentication failure although the secrets are equal",
            cluster.name(index)
        );
    }
}

/// The admin socket (issue 7, security): even when its file and directories are opened to
/// everyone, the daemon answers only root and its own user (SO_PEERCRED): another user's
/// `tandem status` gets no answer, and the refusal is logged. Needs root (CI is root) to run
/// a command as `nobody`; skipped with a message otherwise.
#[test]
fn the_admin_socket_refuses_other_users() {
    use std::os::unix::fs::PermissionsExt;
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: needs root to run a command as another user");
        return;
    }
    let cluster = Cluster::start(Spec::two_nodes('C'));
    let run_dir = cluster.run_dir(0).to_path_buf();
    for path in [
        cluster.dir().to_path_buf(),
        run_dir.clone(),
        run_dir.join("admin.sock"),
    ] {
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o777))
            .expect("open the path to everyone");
    }
    let output = std::process::Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(crate::cluster::tandem_bin())
        .arg("--run-dir")
        .arg(&run_dir)
        .args(["status", RESOURCE])
        .output()
        .expect("run setpriv");
    assert!(
        !output.status.success(),
        "nobody got an answer: {}",
        String::from_utf8_lossy(&output.stdout)
    );
    assert!(
        output.stdout.is_empty(),
        "nobody saw the status: {}",
        String::from_utf8_lossy(&output.stdout)
    );
    cluster.wait_until("the refusal is logged", LOG_DEADLINE, || {
        cluster.log(0).contains("refused a caller")
    });
    assert!(
        cluster.admin(0, &["status", RESOURCE]).status.success(),
        "root is still answered"
    );
}
