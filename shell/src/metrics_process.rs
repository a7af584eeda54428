//! Process and runtime metrics under the names client_golang's process collector uses
//! (`process_*`), read from `/proc/self` at scrape time, plus the tokio runtime's worker and task
//! counts and a build-info series. Off Linux the process series are simply absent.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::DescriptorEncoder;
use prometheus_client::metrics::MetricType;

use crate::allocator::HeapStats;

/// Clock ticks per second of `/proc/<pid>/stat` times (`USER_HZ`, 100 on every Linux ABI).
const USER_HZ: f64 = 100.0;

/// Collects `process_*`, `nodewright_operator_runtime_*` and `nodewright_operator_build_info`.
#[derive(Debug, Default)]
pub struct ProcessCollector;

/// What `/proc/self` told at one scrape.
#[derive(Debug, Default, PartialEq)]
pub struct ProcessStats {
    /// User plus system CPU time in seconds.
    pub cpu_seconds: f64,
    /// Start time in seconds since the epoch.
    pub start_time_seconds: f64,
    /// Resident set size in bytes.
    pub resident_bytes: f64,
    /// Virtual memory size in bytes.
    pub virtual_bytes: f64,
    /// OS threads.
    pub threads: f64,
    /// Open file descriptors.
    pub open_fds: f64,
    /// Soft limit of open file descriptors.
    pub max_fds: f64,
}

impl ProcessStats {
    /// Reads the stats of this process; `None` where `/proc` is not available.
    pub fn read() -> Option<Self> {
        let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
        let status = std::fs::read_to_string("/proc/self/status").ok()?;
        let boot = std::fs::read_to_string("/proc/stat").ok()?;
        let limits = std::fs::read_to_string("/proc/self/limits").unwrap_or_default();
        let open_fds = std::fs::read_dir("/proc/self/fd").map_or(0, |d| d.count());
        let mut s = parse(&stat, &status, &boot, &limits)?;
        s.open_fds = open_fds as f64;
        Some(s)
    }
}

/// Parses the contents of `/proc/self/stat`, `/proc/self/status`, `/proc/stat` and
/// `/proc/self/limits` (open fds are counted by the caller).
pub fn parse(stat: &str, status: &str, boot: &str, limits: &str) -> Option<ProcessStats> {
    // Fields after the command name, which is in parentheses and may contain spaces.
    let after = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = after.split_whitespace().collect();
    // `after` starts at field 3 (state): utime is field 14, stime 15, starttime 22.
    let field = |n: usize| fields.get(n - 3).and_then(|v| v.parse::<f64>().ok());
    let btime = boot
        .lines()
        .find_map(|l| l.strip_prefix("btime "))
        .and_then(|v| v.trim().parse::<f64>().ok())?;
    let kib = |key: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse::<f64>().ok())
    };
    let max_fds = limits
        .lines()
        .find_map(|l| l.strip_prefix("Max open files"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse::<f64>().ok())
        .unwrap_or(0.0);
    Some(ProcessStats {
        cpu_seconds: (field(14)? + field(15)?) / USER_HZ,
        start_time_seconds: btime + field(22)? / USER_HZ,
        resident_bytes: kib("VmRSS:").unwrap_or(0.0) * 1024.0,
        virtual_bytes: kib("VmSize:").unwrap_or(0.0) * 1024.0,
        threads: kib("Threads:").unwrap_or(0.0),
        open_fds: 0.0,
        max_fds,
    })
}

fn one(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    kind: MetricType,
    value: f64,
) -> Result<(), std::fmt::Error> {
    let mut metric = encoder.encode_descriptor(name, help, None, kind)?;
    match kind {
        MetricType::Counter => {
            metric.encode_counter::<prometheus_client::encoding::NoLabelSet, _, f64>(&value, None)
        }
        _ => metric.encode_gauge(&value),
    }
}

/// Encodes the two heap gauges.
fn heap(e: &mut DescriptorEncoder, h: &HeapStats) -> Result<(), std::fmt::Error> {
    one(
        e,
        "nodewright_operator_heap_in_use_bytes",
        "Bytes the operator holds from its allocator (jemalloc, or glibc malloc)",
        MetricType::Gauge,
        h.in_use_bytes,
    )?;
    one(
        e,
        "nodewright_operator_heap_free_bytes",
        "Bytes the allocator keeps resident or mapped beyond those in use",
        MetricType::Gauge,
        h.free_bytes,
    )
}

impl Collector for ProcessCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let e = &mut encoder;
        if let Some(s) = ProcessStats::read() {
            let counter = MetricType::Counter;
            let gauge = MetricType::Gauge;
            one(
                e,
                "process_cpu_seconds",
                "Total user and system CPU time spent in seconds",
                counter,
                s.cpu_seconds,
            )?;
            one(
                e,
                "process_start_time_seconds",
                "Start time of the process since unix epoch in seconds",
                gauge,
                s.start_time_seconds,
            )?;
            one(
                e,
                "process_resident_memory_bytes",
                "Resident memory size in bytes",
                gauge,
                s.resident_bytes,
            )?;
            one(
                e,
                "process_virtual_memory_bytes",
                "Virtual memory size in bytes",
                gauge,
                s.virtual_bytes,
            )?;
            one(
                e,
                "process_threads",
                "Number of OS threads of the process",
                gauge,
                s.threads,
            )?;
            one(
                e,
                "process_open_fds",
                "Number of open file descriptors",
                gauge,
                s.open_fds,
            )?;
            one(
                e,
                "process_max_fds",
                "Maximum number of open file descriptors",
                gauge,
                s.max_fds,
            )?;
        }
        if let Some(h) = HeapStats::read() {
            heap(e, &h)?;
        }
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            let m = handle.metrics();
            one(
                e,
                "nodewright_operator_runtime_workers",
                "Worker threads of the async runtime",
                MetricType::Gauge,
                m.num_workers() as f64,
            )?;
            one(
                e,
                "nodewright_operator_runtime_alive_tasks",
                "Tasks alive in the async runtime",
                MetricType::Gauge,
                m.num_alive_tasks() as f64,
            )?;
        }
        let mut info = encoder.encode_descriptor(
            "nodewright_operator_build_info",
            "Always 1; the version label names the running operator build",
            None,
            MetricType::Gauge,
        )?;
        let labels = vec![("version", env!("CARGO_PKG_VERSION"))];
        info.encode_family(&labels)?.encode_gauge(&1i64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_files_are_parsed() {
        let stat = "4242 (node wright) S 1 4242 4242 0 -1 4194560 900 0 0 0 250 50 0 0 20 0 \
                    7 0 12345 1000000 500 18446744073709551615";
        let status = "Name:\tx\nVmSize:\t  2048 kB\nVmRSS:\t  1024 kB\nThreads:\t7\n";
        let boot = "cpu 1 2 3\nbtime 1700000000\n";
        let limits = "Limit Soft Hard Units\nMax open files            1024                 4096                 files\n";
        let s = parse(stat, status, boot, limits).expect("parsed");
        assert_eq!(s.cpu_seconds, 3.0);
        assert_eq!(s.start_time_seconds, 1_700_000_123.45);
        assert_eq!(s.resident_bytes, 1024.0 * 1024.0);
        assert_eq!(s.virtual_bytes, 2048.0 * 1024.0);
        assert_eq!(s.threads, 7.0);
        assert_eq!(s.max_fds, 1024.0);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn this_process_reports_itself() {
        let s = ProcessStats::read().expect("/proc is readable");
        assert!(s.resident_bytes > 0.0 && s.open_fds > 0.0 && s.start_time_seconds > 1e9);
    }
}
