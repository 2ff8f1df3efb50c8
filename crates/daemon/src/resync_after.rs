//! `resync-after`: a volume's resync waits while the volume it names (`res` or `res/vol`, on
//! this node) has a resync that has not finished, so resyncs sharing a disk or a link run one
//! after the other. The dependencies are resolved and checked at start-up (every name exists,
//! no cycle); a task then watches the named volumes and tells each dependent engine when to
//! hold or release its resync (`Engine::set_sync_dependency`, shown as
//! `resync-suspended:dependency`).
//!
//! Invariants:
//! - A chain is followed through the engines' own states: a volume held by its dependency
//!   still counts as resyncing, so a volume after it waits too.
//! - A cycle is refused at start-up, so the chain always ends and something always runs.

use std::sync::Arc;
use std::time::Duration;

use crate::resource::Resource;

/// How often the named volumes are looked at.
const POLL_INTERVAL: Duration = Duration::from_millis(100);

/// One volume and the volume whose resync it waits for (indices into the node's resources).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Dependency {
    pub(crate) resource: usize,
    pub(crate) volume: u16,
    pub(crate) after_resource: usize,
    pub(crate) after_volume: u16,
}

/// What setup knows about one resource of this node: its name and each volume's number and
/// `resync-after` value.
pub(crate) struct Declared {
    pub(crate) name: String,
    pub(crate) volumes: Vec<(u16, Option<String>)>,
}

/// Resolves every `resync-after` of this node's volumes; an error names the bad setting.
pub(crate) fn resolve(declared: &[Declared]) -> Result<Vec<Dependency>, String> {
    let mut dependencies = Vec::new();
    for (resource, r) in declared.iter().enumerate() {
        for (volume, value) in &r.volumes {
            let Some(value) = value.as_deref().filter(|v| *v != "-1") else {
                continue;
            };
            let (after_resource, after_volume) = lookup(declared, value).map_err(|e| {
                format!(
                    "resource {} volume {volume}: resync-after {value}: {e}",
                    r.name
                )
            })?;
            dependencies.push(Dependency {
                resource,
                volume: *volume,
                after_resource,
                after_volume,
            });
        }
    }
    check_cycles(declared, &dependencies)?;
    Ok(dependencies)
}

fn lookup(declared: &[Declared], value: &str) -> Result<(usize, u16), String> {
    let (name, volume) = match value.split_once('/') {
        Some((name, volume)) => (
            name,
            volume
                .parse::<u16>()
                .map_err(|_| format!("'{volume}' is not a volume number"))?,
        ),
        None => (value, 0),
    };
    let index = declared
        .iter()
        .position(|r| r.name == name)
        .ok_or_else(|| format!("no resource '{name}' runs on this node"))?;
    if !declared[index]
        .volumes
        .iter()
        .any(|(number, _)| *number == volume)
    {
        return Err(format!("resource '{name}' has no volume {volume}"));
    }
    Ok((index, volume))
}

fn check_cycles(declared: &[Declared], dependencies: &[Dependency]) -> Result<(), String> {
    let next = |at: (usize, u16)| {
        dependencies
            .iter()
            .find(|d| (d.resource, d.volume) == at)
            .map(|d| (d.after_resource, d.after_volume))
    };
    for start in dependencies {
        let mut at = (start.resource, start.volume);
        let mut path = vec![at];
        while let Some(after) = next(at) {
            if path.contains(&after) {
                path.push(after);
                let names: Vec<String> = path
                    .iter()
                    .map(|(r, v)| format!("{}/{v}", declared[*r].name))
                    .collect();
                return Err(format!(
                    "resync-after forms a cycle: {}",
                    names.join(" -> ")
                ));
            }
            path.push(after);
            at = after;
        }
    }
    Ok(())
}

/// Holds and releases the dependent resyncs for as long as the node runs.
pub(crate) async fn run(resources: Vec<Arc<Resource>>, dependencies: Vec<Dependency>) {
    let mut held = vec![false; dependencies.len()];
    let mut interval = tokio::time::interval(POLL_INTERVAL);
    loop {
        interval.tick().await;
        for (dependency, held) in dependencies.iter().zip(held.iter_mut()) {
            let (Some(after), Some(dependent)) = (
                resources.get(dependency.after_resource),
                resources.get(dependency.resource),
            ) else {
                continue;
            };
            let running = after.step(|engine, _, _| engine.resync_running(dependency.after_volume));
            if running == *held {
                continue;
            }
            *held = running;
            let what = if running {
                "held until"
            } else {
                "released: resync finished on"
            };
            tracing::info!(
                "{}/{}: resync {what} {}/{} (resync-after)",
                dependent.name,
                dependency.volume,
                after.name,
                dependency.after_volume
            );
            dependent.step(|engine, now, out| {
                engine.set_sync_dependency(now, dependency.volume, running, out)
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A resource name and its volumes with their `resync-after` values.
    type Spec<'a> = (&'a str, &'a [(u16, Option<&'a str>)]);

    fn declared(specs: &[Spec<'_>]) -> Vec<Declared> {
        specs
            .iter()
            .map(|(name, volumes)| Declared {
                name: (*name).to_owned(),
                volumes: volumes
                    .iter()
                    .map(|(n, v)| (*n, v.map(str::to_owned)))
                    .collect(),
            })
            .collect()
    }

    #[test]
    fn names_resolve_to_resources_and_volumes() {
        let node = declared(&[
            ("r0", &[(0, None), (1, Some("r0/0"))]),
            ("r1", &[(0, Some("r0")), (1, Some("-1"))]),
        ]);
        let resolved = resolve(&node).expect("valid");
        assert_eq!(
            resolved,
            vec![
                Dependency {
                    resource: 0,
                    volume: 1,
                    after_resource: 0,
                    after_volume: 0
                },
                Dependency {
                    resource: 1,
                    volume: 0,
                    after_resource: 0,
                    after_volume: 0
                },
            ]
        );
    }

    #[test]
    fn bad_names_and_cycles_are_refused_with_what_is_wrong() {
        let cases: &[(Vec<Declared>, &str)] = &[
            (
                declared(&[("r0", &[(0, Some("r9"))])]),
                "resource r0 volume 0: resync-after r9: no resource 'r9' runs on this node",
            ),
            (
                declared(&[("r0", &[(0, Some("r0/3"))])]),
                "resource 'r0' has no volume 3",
            ),
            (
                declared(&[("r0", &[(0, Some("r0/x"))])]),
                "'x' is not a volume number",
            ),
            (
                declared(&[("r0", &[(0, Some("r0/0"))])]),
                "resync-after forms a cycle: r0/0 -> r0/0",
            ),
            (
                declared(&[
                    ("r0", &[(0, Some("r1"))]),
                    ("r1", &[(0, Some("r2"))]),
                    ("r2", &[(0, Some("r0"))]),
                ]),
                "cycle: r0/0 -> r1/0 -> r2/0 -> r0/0",
            ),
        ];
        for (node, expected) in cases {
            let error = resolve(node).expect_err(expected);
            assert!(
                error.contains(expected),
                "{error:?} should contain {expected:?}"
            );
        }
    }
}
