//! The kernel's log, read for one fact: did the OOM killer act inside a given cgroup since
//! a given moment? systemd reports `Result=oom-kill` only on cgroup v2 hosts; on hosts with
//! the v1 memory controller the kernel's own record is the witness.

use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;

/// True when a kernel record at or after `since_us` (microseconds since boot, the
/// monotonic clock) says the OOM killer acted in a memory cgroup whose path ends with
/// `/leaf` — "oom-kill:constraint=CONSTRAINT_MEMCG,…,oom_memcg=/…/LEAF,…".
pub fn oom_killed_in(leaf: &str, since_us: u64) -> bool {
    let Ok(mut kmsg) = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open("/dev/kmsg")
    else {
        return false;
    };
    let mut buf = vec![0u8; 8192];
    // One record per read; EAGAIN at the end of the buffer.
    loop {
        match kmsg.read(&mut buf) {
            Ok(0) => return false,
            Ok(n) => {
                if record_matches(&String::from_utf8_lossy(&buf[..n]), leaf, since_us) {
                    return true;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            // EPIPE: a record was overwritten while reading; go on with the next one.
            Err(e) if e.raw_os_error() == Some(libc::EPIPE) => continue,
            Err(_) => return false,
        }
    }
}

/// One `/dev/kmsg` record: "PRIO,SEQ,USEC,FLAGS;MESSAGE".
fn record_matches(record: &str, leaf: &str, since_us: u64) -> bool {
    let Some((header, message)) = record.split_once(';') else {
        return false;
    };
    let usec: u64 = header
        .split(',')
        .nth(2)
        .and_then(|u| u.parse().ok())
        .unwrap_or(0);
    if usec < since_us || !message.starts_with("oom-kill:") {
        return false;
    }
    message
        .split(',')
        .find_map(|f| f.strip_prefix("oom_memcg="))
        .is_some_and(|path| path.trim_end().ends_with(&format!("/{leaf}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    const RECORD: &str = "6,2491,3726058855,-;oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0,oom_memcg=/system.slice/system-mysqld.slice/mysqld@hog.service,task_memcg=/system.slice/system-mysqld.slice/mysqld@hog.service,task=mariadbd,pid=19641,uid=102\n";

    #[test]
    fn records_of_the_unit_after_its_start_match() {
        assert!(record_matches(RECORD, "mysqld@hog.service", 3_000_000_000));
        assert!(
            !record_matches(RECORD, "mysqld@hog.service", 4_000_000_000),
            "before the start"
        );
        assert!(
            !record_matches(RECORD, "mysqld@calm.service", 0),
            "another unit"
        );
        assert!(
            !record_matches(RECORD, "hog.service", 0),
            "a whole path element"
        );
        assert!(!record_matches(
            "6,1,5,-;Out of memory: Killed process 1\n",
            "x",
            0
        ));
    }
}
