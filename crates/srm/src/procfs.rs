//! Pure parsers for the /proc files the driver samples: `/proc/stat` (CPU time, turned into
//! busy and steal shares between two samples), `/proc/loadavg`, `/proc/meminfo` and
//! `/proc/pressure/{cpu,memory,io}`. The driver reads the files; these functions only see
//! their text.
//!
//! Invariants: no input makes a parser panic or overflow (arithmetic is checked, and a
//! bad field is an [`SrmError::Proc`] naming the file and line); fixed-point values keep
//! their decimals as integers (load in hundredths, pressure in basis points), so nothing
//! here touches floating point.

use crate::error::SrmError;
use crate::observation::{permille_of, Pressure};

#[cfg(test)]
mod tests;

/// Cumulative CPU time of all CPUs from the `cpu` line of /proc/stat, in clock ticks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpuTimes {
    /// user + nice (guest time is already included in them).
    pub user: u64,
    /// system + irq + softirq.
    pub system: u64,
    /// idle.
    pub idle: u64,
    /// iowait (idle time with I/O outstanding).
    pub iowait: u64,
    /// steal (time the hypervisor gave to someone else).
    pub steal: u64,
    /// Number of `cpuN` lines: online CPUs.
    pub cpu_count: u32,
}

/// CPU shares between two samples.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpuShares {
    /// Share of time neither idle nor in iowait (steal counts as busy).
    pub busy_permille: u32,
    /// Share of time stolen.
    pub steal_permille: u32,
}

/// /proc/loadavg.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LoadAverage {
    /// 1-minute load average, in hundredths.
    pub one_minute_hundredths: u32,
    /// 5-minute load average, in hundredths.
    pub five_minutes_hundredths: u32,
    /// 15-minute load average, in hundredths.
    pub fifteen_minutes_hundredths: u32,
    /// Runnable scheduling entities.
    pub runnable: u32,
    /// All scheduling entities.
    pub total: u32,
}

/// The two /proc/meminfo fields the manager uses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemInfo {
    /// `MemTotal`, in bytes.
    pub total_bytes: u64,
    /// `MemAvailable`, in bytes.
    pub available_bytes: u64,
}

impl MemInfo {
    /// Available memory as a share of the total (0 when the total is 0).
    pub fn available_permille(&self) -> u32 {
        permille_of(self.available_bytes, self.total_bytes).unwrap_or(0)
    }
}

/// One line (`some` or `full`) of a pressure-stall file.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PressureLine {
    /// `avg10`, in basis points (hundredths of a percent).
    pub avg10_basis_points: u32,
    /// `avg60`, in basis points.
    pub avg60_basis_points: u32,
    /// `avg300`, in basis points.
    pub avg300_basis_points: u32,
    /// `total`: stall time in microseconds since boot.
    pub total_micros: u64,
}

/// A /proc/pressure/{cpu,memory,io} file.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PressureFile {
    /// The `some` line.
    pub some: PressureLine,
    /// The `full` line (older kernels have none for cpu).
    pub full: Option<PressureLine>,
}

impl PressureFile {
    /// The part the manager's observation carries.
    pub fn pressure(&self) -> Pressure {
        Pressure {
            some_avg10_basis_points: self.some.avg10_basis_points,
            some_avg60_basis_points: self.some.avg60_basis_points,
        }
    }
}

/// Most basis points a pressure average can be (100%).
const BASIS_POINTS_MAX: u32 = 10_000;

fn error(file: &'static str, line: usize, reason: impl Into<String>) -> SrmError {
    SrmError::Proc {
        file,
        line,
        reason: reason.into(),
    }
}

/// Parses /proc/stat.
pub fn parse_stat(text: &str) -> Result<CpuTimes, SrmError> {
    const FILE: &str = "/proc/stat";
    let mut times: Option<CpuTimes> = None;
    let mut cpu_count: u32 = 0;
    for (index, line) in text.lines().enumerate() {
        let mut fields = line.split_ascii_whitespace();
        match fields.next() {
            Some("cpu") => {
                let values: Vec<u64> = fields
                    .map(|field| {
                        field.parse::<u64>().map_err(|_| {
                            error(FILE, index + 1, format!("'{field}' is not a tick count"))
                        })
                    })
                    .collect::<Result<_, _>>()?;
                let parsed = cpu_times(&values).map_err(|reason| error(FILE, index + 1, reason))?;
                times = Some(parsed);
            }
            Some(name)
                if name
                    .strip_prefix("cpu")
                    .is_some_and(|number| number.bytes().all(|byte| byte.is_ascii_digit())) =>
            {
                cpu_count = cpu_count.saturating_add(1);
            }
            _ => {}
        }
    }
    let times = times.ok_or_else(|| error(FILE, 0, "no cpu line"))?;
    Ok(CpuTimes { cpu_count, ..times })
}

/// user nice system idle iowait irq softirq steal [guest guest_nice].
fn cpu_times(values: &[u64]) -> Result<CpuTimes, &'static str> {
    let [user, nice, system, idle, iowait, irq, softirq, steal, ..] = *values else {
        return Err("the cpu line has fewer than 8 fields");
    };
    let overflow = "the cpu line's tick counts overflow";
    Ok(CpuTimes {
        user: user.checked_add(nice).ok_or(overflow)?,
        system: system
            .checked_add(irq)
            .and_then(|sum| sum.checked_add(softirq))
            .ok_or(overflow)?,
        idle,
        iowait,
        steal,
        cpu_count: 0,
    })
}

impl CpuTimes {
    fn total(&self) -> u64 {
        [self.user, self.system, self.idle, self.iowait, self.steal]
            .iter()
            .fold(0u64, |sum, value| sum.saturating_add(*value))
    }
}

/// Busy and steal shares between `before` and `after` (counters that went backwards, as
/// after a CPU went offline, count as no time).
pub fn cpu_shares(before: &CpuTimes, after: &CpuTimes) -> CpuShares {
    let total = after.total().saturating_sub(before.total());
    let idle = after.idle.saturating_sub(before.idle) + after.iowait.saturating_sub(before.iowait);
    let steal = after.steal.saturating_sub(before.steal);
    CpuShares {
        busy_permille: permille_of(total.saturating_sub(idle), total).unwrap_or(0),
        steal_permille: permille_of(steal, total).unwrap_or(0),
    }
}

/// Parses /proc/loadavg (`0.52 0.58 0.59 2/1234 5678`).
pub fn parse_loadavg(text: &str) -> Result<LoadAverage, SrmError> {
    const FILE: &str = "/proc/loadavg";
    let bad = |reason: &str| error(FILE, 1, reason);
    let fields: Vec<&str> = text.split_ascii_whitespace().collect();
    let [one, five, fifteen, entities, ..] = fields.as_slice() else {
        return Err(bad("expected at least 4 fields"));
    };
    let load = |field: &str| {
        fixed_point(field, 2)
            .and_then(|value| u32::try_from(value).ok())
            .ok_or_else(|| bad(&format!("'{field}' is not a load average")))
    };
    let (runnable, total) = entities
        .split_once('/')
        .and_then(|(runnable, total)| Some((runnable.parse().ok()?, total.parse().ok()?)))
        .ok_or_else(|| bad(&format!("'{entities}' is not runnable/total")))?;
    Ok(LoadAverage {
        one_minute_hundredths: load(one)?,
        five_minutes_hundredths: load(five)?,
        fifteen_minutes_hundredths: load(fifteen)?,
        runnable,
        total,
    })
}

/// Parses /proc/meminfo (`MemTotal` and `MemAvailable`, in kB).
pub fn parse_meminfo(text: &str) -> Result<MemInfo, SrmError> {
    const FILE: &str = "/proc/meminfo";
    let mut total = None;
    let mut available = None;
    for (index, line) in text.lines().enumerate() {
        let Some((key, rest)) = line.split_once(':') else {
            continue;
        };
        let slot = match key {
            "MemTotal" => &mut total,
            "MemAvailable" => &mut available,
            _ => continue,
        };
        let bytes = match rest.split_ascii_whitespace().collect::<Vec<_>>().as_slice() {
            [value, "kB"] => value
                .parse::<u64>()
                .ok()
                .and_then(|kib| kib.checked_mul(1024)),
            _ => None,
        };
        *slot =
            Some(bytes.ok_or_else(|| {
                error(FILE, index + 1, format!("'{}' is not 'N kB'", rest.trim()))
            })?);
    }
    let total = total.ok_or_else(|| error(FILE, 0, "no MemTotal line"))?;
    let available = available.ok_or_else(|| error(FILE, 0, "no MemAvailable line"))?;
    Ok(MemInfo {
        total_bytes: total,
        available_bytes: available,
    })
}

/// Parses a /proc/pressure file; `file` names it for errors (`/proc/pressure/io`).
pub fn parse_pressure(text: &str, file: &'static str) -> Result<PressureFile, SrmError> {
    let mut some = None;
    let mut full = None;
    for (index, line) in text.lines().enumerate() {
        let mut fields = line.split_ascii_whitespace();
        let slot = match fields.next() {
            Some("some") => &mut some,
            Some("full") => &mut full,
            None => continue,
            Some(other) => {
                return Err(error(
                    file,
                    index + 1,
                    format!("unknown line kind '{other}'"),
                ))
            }
        };
        *slot = Some(pressure_line(fields).map_err(|reason| error(file, index + 1, reason))?);
    }
    let some = some.ok_or_else(|| error(file, 0, "no 'some' line"))?;
    Ok(PressureFile { some, full })
}

fn pressure_line<'a>(fields: impl Iterator<Item = &'a str>) -> Result<PressureLine, String> {
    let mut line = PressureLine::default();
    let mut seen = [false; 4];
    for field in fields {
        let (key, value) = field
            .split_once('=')
            .ok_or_else(|| format!("'{field}' is not key=value"))?;
        let average = || {
            fixed_point(value, 2)
                .and_then(|points| u32::try_from(points).ok())
                .filter(|points| *points <= BASIS_POINTS_MAX)
                .ok_or_else(|| format!("'{value}' is not a percentage"))
        };
        let slot = match key {
            "avg10" => {
                line.avg10_basis_points = average()?;
                0
            }
            "avg60" => {
                line.avg60_basis_points = average()?;
                1
            }
            "avg300" => {
                line.avg300_basis_points = average()?;
                2
            }
            "total" => {
                line.total_micros = value
                    .parse()
                    .map_err(|_| format!("'{value}' is not a microsecond count"))?;
                3
            }
            _ => return Err(format!("unknown field '{key}'")),
        };
        seen[slot] = true;
    }
    if seen.iter().all(|seen| *seen) {
        Ok(line)
    } else {
        Err("expected avg10, avg60, avg300 and total".to_string())
    }
}

/// `12.345` with `decimals` = 2 → 1234 (further decimals are cut off); `None` if `text` is
/// not digits with at most one point, or the value does not fit.
fn fixed_point(text: &str, decimals: u32) -> Option<u64> {
    let (whole, fraction) = text.split_once('.').unwrap_or((text, ""));
    let digits = |part: &str| part.bytes().all(|byte| byte.is_ascii_digit());
    if whole.is_empty() || !digits(whole) || !digits(fraction) {
        return None;
    }
    let mut value: u64 = whole.parse().ok()?;
    let mut fraction = fraction.bytes();
    for _ in 0..decimals {
        let digit = fraction.next().map_or(0, |byte| u64::from(byte - b'0'));
        value = value.checked_mul(10)?.checked_add(digit)?;
    }
    Some(value)
}
