//! Parsers on real /proc texts (sampled from a Linux 6.x guest with 2 CPUs, trimmed) and on
//! garbage: a table of bad inputs with the exact error, and a property test that no input
//! makes any parser panic.

use proptest::prelude::*;

use super::*;

const STAT_BEFORE: &str = "cpu  1063154 0 710529 1843156 73906 0 47432 19738 0 0
cpu0 522126 0 351318 955648 15337 0 22757 9880 0 0
cpu1 541027 0 359210 887508 58568 0 24675 9857 0 0
intr 158126129 0 0 0 0 0 0 0 0 0 0 0 0 0
ctxt 457062538
btime 1763700000
processes 812345
procs_running 2
procs_blocked 0
softirq 33333 1 2 3 4 5 6 7 8 9 10
";

/// 1000 ticks later: 600 user, 200 system, 100 idle, 0 iowait, 100 steal.
const STAT_AFTER: &str = "cpu  1063754 0 710729 1843256 73906 0 47432 19838 0 0
cpu0 522426 0 351418 955698 15337 0 22757 9930 0 0
cpu1 541327 0 359310 887558 58568 0 24675 9907 0 0
";

#[test]
fn stat_real_sample() {
    let before = parse_stat(STAT_BEFORE);
    assert_eq!(
        before,
        Ok(CpuTimes {
            user: 1_063_154,
            system: 710_529 + 47_432,
            idle: 1_843_156,
            iowait: 73_906,
            steal: 19_738,
            cpu_count: 2,
        })
    );
    let after = parse_stat(STAT_AFTER);
    let (Ok(before), Ok(after)) = (before, after) else {
        panic!("both samples parse");
    };
    assert_eq!(
        cpu_shares(&before, &after),
        CpuShares {
            busy_permille: 900,
            steal_permille: 100
        }
    );
    assert_eq!(
        cpu_shares(&before, &before),
        CpuShares::default(),
        "no time passed"
    );
    assert_eq!(
        cpu_shares(&after, &before).busy_permille,
        0,
        "counters going back count as nothing"
    );
}

#[test]
fn loadavg_meminfo_pressure_real_samples() {
    assert_eq!(
        parse_loadavg("1.19 1.17 1.21 2/92 17123\n"),
        Ok(LoadAverage {
            one_minute_hundredths: 119,
            five_minutes_hundredths: 117,
            fifteen_minutes_hundredths: 121,
            runnable: 2,
            total: 92,
        })
    );
    let meminfo = "MemTotal:       24683656 kB\nMemFree:        14120144 \
        kB\nMemAvailable:   23930788 kB\nBuffers:           51748 kB\nHugePages_Total:       0\n";
    let parsed = parse_meminfo(meminfo);
    assert_eq!(
        parsed,
        Ok(MemInfo {
            total_bytes: 24_683_656 * 1024,
            available_bytes: 23_930_788 * 1024
        })
    );
    assert_eq!(parsed.map(|info| info.available_permille()), Ok(969));
    let cpu = "some avg10=13.34 avg60=10.00 avg300=12.95 total=3475852437\nfull avg10=0.00 \
        avg60=0.00 avg300=0.00 total=0\n";
    let parsed = parse_pressure(cpu, "/proc/pressure/cpu");
    let some = PressureLine {
        avg10_basis_points: 1334,
        avg60_basis_points: 1000,
        avg300_basis_points: 1295,
        total_micros: 3_475_852_437,
    };
    assert_eq!(
        parsed,
        Ok(PressureFile {
            some,
            full: Some(PressureLine::default())
        })
    );
    let pressure = parsed.map(|file| file.pressure());
    assert_eq!(pressure.map(|p| p.some_avg10_basis_points), Ok(1334));
    // Kernels before 5.13 have no `full` line in the cpu file.
    let old = parse_pressure(
        "some avg10=0.04 avg60=0.53 avg300=0.74 total=696898310\n",
        "/proc/pressure/io",
    );
    assert_eq!(
        old.map(|file| (file.some.avg300_basis_points, file.full)),
        Ok((74, None))
    );
}

#[test]
fn bad_texts_are_typed_errors() {
    let message = |result: Result<(), SrmError>| match result {
        Ok(()) => "ok".to_string(),
        Err(error) => error.to_string(),
    };
    let table: &[(Result<(), SrmError>, &str)] = &[
        (parse_stat("").map(drop), "/proc/stat: line 0: no cpu line"),
        (
            parse_stat("cpu 1 2 3\n").map(drop),
            "/proc/stat: line 1: the cpu line has fewer than 8 fields",
        ),
        (
            parse_stat("intr 5\ncpu 1 2 x 4 5 6 7 8\n").map(drop),
            "/proc/stat: line 2: 'x' is not a tick count",
        ),
        (
            parse_stat("cpu 18446744073709551615 1 0 0 0 0 0 0\n").map(drop),
            "/proc/stat: line 1: the cpu line's tick counts overflow",
        ),
        (
            parse_loadavg("1.0 2.0\n").map(drop),
            "/proc/loadavg: line 1: expected at least 4 fields",
        ),
        (
            parse_loadavg("1.0 -2.0 3 1/2 5").map(drop),
            "/proc/loadavg: line 1: '-2.0' is not a load average",
        ),
        (
            parse_loadavg("1 2 3 12 5").map(drop),
            "/proc/loadavg: line 1: '12' is not runnable/total",
        ),
        (parse_loadavg("1. 2 3 1/2 5").map(drop), "ok"),
        (
            parse_loadavg(".5 2 3 1/2 5").map(drop),
            "/proc/loadavg: line 1: '.5' is not a load average",
        ),
        (
            parse_meminfo("MemTotal: 5 kB\n").map(drop),
            "/proc/meminfo: line 0: no MemAvailable line",
        ),
        (
            parse_meminfo("MemAvailable: 5 kB\nMemTotal: 5 MB\n").map(drop),
            "/proc/meminfo: line 2: '5 MB' is not 'N kB'",
        ),
        (
            parse_meminfo("MemTotal: 99999999999999999999 kB\n").map(drop),
            "/proc/meminfo: line 1: '99999999999999999999 kB' is not 'N kB'",
        ),
        (
            parse_pressure("", "p").map(drop),
            "p: line 0: no 'some' line",
        ),
        (
            parse_pressure("some avg10=1.00\n", "p").map(drop),
            "p: line 1: expected avg10, avg60, avg300 and total",
        ),
        (
            parse_pressure("some avg10=100.01 avg60=0 avg300=0 total=0\n", "p").map(drop),
            "p: line 1: '100.01' is not a percentage",
        ),
        (
            parse_pressure("half avg10=1\n", "p").map(drop),
            "p: line 1: unknown line kind 'half'",
        ),
        (
            parse_pressure("some avg10\n", "p").map(drop),
            "p: line 1: 'avg10' is not key=value",
        ),
        (
            parse_pressure("some avg5=1 \n", "p").map(drop),
            "p: line 1: unknown field 'avg5'",
        ),
    ];
    for (result, expected) in table {
        assert_eq!(message(result.clone()), *expected);
    }
}

#[test]
fn fixed_point_table() {
    let table: &[(&str, Option<u64>)] = &[
        ("0", Some(0)),
        ("0.00", Some(0)),
        ("1.5", Some(150)),
        ("13.349", Some(1334)),
        ("007.07", Some(707)),
        ("", None),
        (".", None),
        ("1.2.3", None),
        ("1e3", None),
        ("+1", None),
        ("184467440737095516.15", Some(u64::MAX)),
        ("184467440737095516.16", None),
    ];
    for (text, expected) in table {
        assert_eq!(fixed_point(text, 2), *expected, "{text}");
    }
}

proptest! {
    #[test]
    fn parsers_never_panic(text in "\\PC{0,200}") {
        let _ = parse_stat(&text);
        let _ = parse_loadavg(&text);
        let _ = parse_meminfo(&text);
        let _ = parse_pressure(&text, "p");
    }

    #[test]
    fn parsers_never_panic_on_near_misses(
        words in proptest::collection::vec(
            prop_oneof![
                Just("cpu".to_string()), Just("cpu0".to_string()), Just("some".to_string()),
                Just("full".to_string()), Just("MemTotal:".to_string()),
                Just("MemAvailable:".to_string()), Just("kB".to_string()),
                Just("\n".to_string()), "avg(10|60|300)=[0-9.]{0,8}", "total=[0-9]{0,22}",
                "[0-9]{1,22}", "[0-9]{0,4}\\.[0-9]{0,4}", "[0-9]{0,3}/[0-9]{0,3}",
            ],
            0..40,
        )
    ) {
        let text = words.join(" ");
        let _ = parse_stat(&text);
        let _ = parse_loadavg(&text);
        let _ = parse_meminfo(&text);
        if let Ok(file) = parse_pressure(&text, "p") {
            prop_assert!(file.some.avg10_basis_points <= 10_000);
        }
        if let (Ok(before), Ok(after)) = (parse_stat(&text), parse_stat(STAT_AFTER)) {
            let shares = cpu_shares(&before, &after);
            prop_assert!(shares.busy_permille <= 1000 && shares.steal_permille <= 1000);
        }
    }
}
