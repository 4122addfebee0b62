//! The process's own figures under the names every Prometheus client library uses
//! (`process_resident_memory_bytes`, `process_cpu_seconds_total`, `process_open_fds`,
//! `process_max_fds`, `process_start_time_seconds`), read from `/proc/self` when scraped, so
//! stock dashboards and alerts work unchanged.
//!
//! Linux only: elsewhere `/proc/self` does not exist, every read fails, and the series are
//! absent rather than a misleading 0. Unsafe code is forbidden in this crate, so the clock tick
//! (`sysconf(_SC_CLK_TCK)`) is taken as Linux's `USER_HZ`, 100: it is fixed at 100 in the
//! kernel's user ABI on every architecture Rust targets
//! (<https://man7.org/linux/man-pages/man5/proc_pid_stat.5.html>, "clock ticks").

use std::fmt::Write as _;

/// Linux's `USER_HZ`: the unit of the CPU times and start time in `/proc/self/stat`.
const TICKS_PER_SECOND: f64 = 100.0;

/// The process's figures, as read at one scrape.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct ProcessFigures {
    /// Resident memory in bytes (`VmRSS`).
    pub resident_memory_bytes: Option<u64>,
    /// User and system CPU time, in seconds.
    pub cpu_seconds: Option<f64>,
    /// Open file descriptors.
    pub open_fds: Option<u64>,
    /// The soft limit on open file descriptors.
    pub max_fds: Option<u64>,
    /// When the process started, in seconds since the Unix epoch.
    pub start_time_seconds: Option<f64>,
}

impl ProcessFigures {
    /// Read the figures of this process; each one that cannot be read is `None`.
    pub fn read() -> Self {
        let stat = std::fs::read_to_string("/proc/self/stat").ok();
        let fields = stat.as_deref().and_then(stat_fields);
        let cpu_seconds = fields.as_ref().and_then(|f| {
            // utime and stime, fields 14 and 15 of proc_pid_stat(5).
            let user = f.get(13)?.parse::<u64>().ok()?;
            let system = f.get(14)?.parse::<u64>().ok()?;
            #[allow(clippy::cast_precision_loss)] // ticks far below 2^52
            Some((user + system) as f64 / TICKS_PER_SECOND)
        });
        let start_time_seconds = fields.as_ref().and_then(|f| {
            // starttime, field 22: ticks after boot; boot time is `btime` in /proc/stat.
            let after_boot = f.get(21)?.parse::<u64>().ok()?;
            let boot = boot_time_seconds()?;
            #[allow(clippy::cast_precision_loss)] // seconds and ticks far below 2^52
            Some(boot as f64 + after_boot as f64 / TICKS_PER_SECOND)
        });
        Self {
            resident_memory_bytes: resident_memory_bytes(),
            cpu_seconds,
            open_fds: std::fs::read_dir("/proc/self/fd")
                .ok()
                .map(|entries| entries.count() as u64),
            max_fds: max_fds(),
            start_time_seconds,
        }
    }

    /// The figures in the OpenMetrics text format, the absent ones left out.
    pub fn encode(&self, out: &mut String) {
        let mut metric = |name: &str, kind: &str, help: &str, value: Option<String>| {
            if let Some(value) = value {
                let sample = if kind == "counter" {
                    format!("{name}_total")
                } else {
                    name.to_owned()
                };
                // Writing to a String cannot fail.
                let _ = write!(
                    out,
                    "# HELP {name} {help}\n# TYPE {name} {kind}\n{sample} {value}\n"
                );
            }
        };
        metric(
            "process_resident_memory_bytes",
            "gauge",
            "Resident memory size in bytes.",
            self.resident_memory_bytes.map(|v| v.to_string()),
        );
        metric(
            "process_cpu_seconds",
            "counter",
            "Total user and system CPU time spent in seconds.",
            self.cpu_seconds.map(|v| format!("{v:.2}")),
        );
        metric(
            "process_open_fds",
            "gauge",
            "Number of open file descriptors.",
            self.open_fds.map(|v| v.to_string()),
        );
        metric(
            "process_max_fds",
            "gauge",
            "Maximum number of open file descriptors.",
            self.max_fds.map(|v| v.to_string()),
        );
        metric(
            "process_start_time_seconds",
            "gauge",
            "Start time of the process since unix epoch in seconds.",
            self.start_time_seconds.map(|v| format!("{v:.2}")),
        );
    }
}

/// The space-separated fields of `/proc/self/stat`, the command name (field 2, which may
/// itself hold spaces and parentheses) kept as one: it ends at the last `)`.
fn stat_fields(stat: &str) -> Option<Vec<&str>> {
    let (pid, rest) = stat.split_once(" (")?;
    let (comm, rest) = rest.rsplit_once(") ")?;
    let mut fields = vec![pid, comm];
    fields.extend(rest.split_ascii_whitespace());
    Some(fields)
}

fn resident_memory_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    // "VmRSS:	   12345 kB"
    let kib = line.split_ascii_whitespace().nth(1)?.parse::<u64>().ok()?;
    Some(kib.saturating_mul(1024))
}

fn max_fds() -> Option<u64> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    // "Max open files            1024                 524288               files"
    line.trim_start_matches("Max open files")
        .split_ascii_whitespace()
        .next()?
        .parse()
        .ok()
}

fn boot_time_seconds() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    stat.lines()
        .find_map(|l| l.strip_prefix("btime "))?
        .trim()
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_name_with_spaces_and_parentheses_stays_one_field() {
        let stat = "42 (a) b (c)) S 1 42 42 0 -1 4194560 100 0 0 0 7 3 0 0 20 0 4 0 500 0";
        let fields = stat_fields(stat).unwrap();
        assert_eq!(fields[1], "a) b (c)");
        assert_eq!(fields[2], "S");
        assert_eq!(fields[13], "7");
        assert_eq!(fields[21], "500");
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn every_figure_is_read_on_linux() {
        let figures = ProcessFigures::read();
        assert!(figures.resident_memory_bytes.is_some_and(|b| b > 0));
        assert!(figures.cpu_seconds.is_some());
        assert!(figures.open_fds.is_some_and(|n| n >= 3));
        assert!(figures.max_fds.is_some());
        assert!(figures.start_time_seconds.is_some_and(|s| s > 1.0e9));
        let mut text = String::new();
        figures.encode(&mut text);
        assert!(text.contains("# TYPE process_cpu_seconds counter\nprocess_cpu_seconds_total "));
    }

    #[test]
    fn absent_figures_have_no_series() {
        let mut text = String::new();
        ProcessFigures::default().encode(&mut text);
        assert_eq!(text, "");
    }
}
