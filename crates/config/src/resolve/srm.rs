//! Cross-field rules on tandem's Selective Replication Manager options, checked on each
//! connection's effective net options together with the resource's `srm` mode. Each rule
//! refuses a combination that cannot mean anything sensible, pointing at the setting that
//! asked for it (or, when it is a default, at the one it contradicts).
//!
//! Invariant: a configuration that loads gives the manager settings its own validation
//! (`srm::SrmConfig::validate`) accepts: lag bounds non-zero and no shorter than the
//! interval when the manager may act, every return threshold below its enter threshold,
//! every minimum at most its maximum.

use std::time::Duration;

use crate::error::{ConfigError, Location};
use crate::options::enums::{AsyncBufferCompress, Protocol, Srm};
use crate::options::set::OptionSet;
use crate::options::{NetOptions, ResourceOptions};

#[cfg(test)]
mod tests;

/// Where the settings of one connection come from, for error locations.
pub(crate) struct Sources<'a> {
    /// The connection's merged net settings.
    pub net: &'a OptionSet,
    /// The resource's merged `options` settings.
    pub options: &'a OptionSet,
    /// Where to point when none of the settings involved is written anywhere.
    pub fallback: &'a Location,
}

impl Sources<'_> {
    /// The location of the first of `names` that is written explicitly.
    fn at(&self, names: &[&str]) -> &Location {
        names
            .iter()
            .find_map(|name| {
                self.net
                    .location(name)
                    .or_else(|| self.options.location(name))
            })
            .unwrap_or(self.fallback)
    }
}

/// Checks the manager's rules on one connection's effective `net` options.
pub(crate) fn check(
    net: &NetOptions,
    options: &ResourceOptions,
    sources: &Sources<'_>,
) -> Result<(), ConfigError> {
    if options.srm != Srm::Off {
        check_lag(net, options, sources)?;
    }
    check_thresholds(net, sources)?;
    check_bounds(net, sources)?;
    check_async_buffer(net, options, sources)
}

fn millis(duration: Duration) -> u128 {
    duration.as_millis()
}

fn check_lag(
    net: &NetOptions,
    options: &ResourceOptions,
    sources: &Sources<'_>,
) -> Result<(), ConfigError> {
    let mode = options.srm;
    if net.srm_max_lag_bytes == 0 {
        let message = format!(
            "srm-max-lag-bytes 0 leaves no room for asynchronous replication with srm {mode}"
        );
        return Err(ConfigError::invalid(
            sources.at(&["srm-max-lag-bytes", "srm"]),
            message,
        ));
    }
    if net.srm_max_lag_time.is_zero() {
        let message = format!(
            "srm-max-lag-time 0 leaves no room for asynchronous replication with srm {mode}"
        );
        return Err(ConfigError::invalid(
            sources.at(&["srm-max-lag-time", "srm"]),
            message,
        ));
    }
    if net.srm_max_lag_time < options.srm_interval {
        let message = format!(
            "srm-max-lag-time {} ms is shorter than srm-interval {} ms",
            millis(net.srm_max_lag_time),
            millis(options.srm_interval)
        );
        let at = sources.at(&["srm-max-lag-time", "srm-interval"]);
        return Err(ConfigError::invalid(at, message));
    }
    Ok(())
}

fn check_thresholds(net: &NetOptions, sources: &Sources<'_>) -> Result<(), ConfigError> {
    if net.srm_latency_low >= net.srm_latency_high {
        let message = format!(
            "srm-latency-low {} ms must be below srm-latency-high {} ms",
            millis(net.srm_latency_low),
            millis(net.srm_latency_high)
        );
        let at = sources.at(&["srm-latency-low", "srm-latency-high"]);
        return Err(ConfigError::invalid(at, message));
    }
    if net.srm_fill_low_percent >= net.srm_fill_high_percent {
        let message = format!(
            "srm-fill-low {}% must be below srm-fill-high {}%",
            net.srm_fill_low_percent, net.srm_fill_high_percent
        );
        let at = sources.at(&["srm-fill-low", "srm-fill-high"]);
        return Err(ConfigError::invalid(at, message));
    }
    Ok(())
}

fn check_bounds(net: &NetOptions, sources: &Sources<'_>) -> Result<(), ConfigError> {
    let pairs = [
        (
            "srm-max-buffers",
            u64::from(net.srm_max_buffers_min),
            u64::from(net.srm_max_buffers_max),
        ),
        (
            "srm-max-epoch-size",
            u64::from(net.srm_max_epoch_size_min),
            u64::from(net.srm_max_epoch_size_max),
        ),
        (
            "srm-sndbuf-size",
            net.srm_sndbuf_size_min_bytes,
            net.srm_sndbuf_size_max_bytes,
        ),
    ];
    for (name, min, max) in pairs {
        if min > max {
            let (min_name, max_name) = (format!("{name}-min"), format!("{name}-max"));
            let message = format!("{min_name} {min} is larger than {max_name} {max}");
            let at = sources.at(&[min_name.as_str(), max_name.as_str()]);
            return Err(ConfigError::invalid(at, message));
        }
    }
    Ok(())
}

fn check_async_buffer(
    net: &NetOptions,
    options: &ResourceOptions,
    sources: &Sources<'_>,
) -> Result<(), ConfigError> {
    let buffer = net.async_buffer_bytes;
    if buffer == 0 {
        if net.async_buffer_compress != AsyncBufferCompress::None {
            let message = format!(
                "async-buffer-compress {} needs an async-buffer",
                net.async_buffer_compress
            );
            return Err(ConfigError::invalid(
                sources.at(&["async-buffer-compress"]),
                message,
            ));
        }
        return Ok(());
    }
    let at = sources.at(&["async-buffer"]);
    if options.srm != Srm::Off && buffer > net.srm_max_lag_bytes {
        let message = format!(
            "async-buffer {buffer} is larger than srm-max-lag-bytes {}: the lag bound would never \
             let it fill",
            net.srm_max_lag_bytes
        );
        return Err(ConfigError::invalid(at, message));
    }
    if options.srm != Srm::On && net.protocol != Protocol::A {
        let message = format!(
            "async-buffer is used only by asynchronous replication: it needs protocol A or srm on \
             (not protocol {} with srm {})",
            net.protocol, options.srm
        );
        return Err(ConfigError::invalid(at, message));
    }
    Ok(())
}
