//! `libdbb-ticks.so`: the library Oracle MySQL servers started by db-branch preload, so
//! that their start does not spend a tenth of a second calibrating a timer nobody reads.
//!
//! At every start `mysqld` runs `my_timer_init` (mysys/my_rdtsc.cc), which works out the
//! frequency of its "ticks" timer by calling `times()` in a loop until the value has moved
//! on by more than 10 ticks. At the kernel's 100 ticks a second that is 100–120 ms of
//! every start, with no option to skip it. The ticks timer is read only by the
//! performance schema's `performance_timers` table; nothing times anything with it.
//!
//! This `times()` moves the elapsed-ticks value it returns on by one extra tick on each of
//! its first `STEPS` calls, which ends that loop after a few microseconds, and from then on
//! adds the constant `STEPS`: every later difference between two calls is the real one.
//! The process times written to `buf` are the kernel's, untouched.
//!
//! Built by build.rs with rustc alone (no std, no crates: nothing runs at load time and
//! nothing allocates), embedded in the db-branch binary and written out beside its state
//! (`server::preload`). Kept free of anything but `core` on purpose: it lives inside
//! every MySQL server db-branch starts.

#![no_std]

use core::ffi::c_long;
use core::sync::atomic::{AtomicU64, Ordering};

/// How many calls move the value on by one tick each: more than `my_timer_init` makes
/// before and inside its loop (21 and 11), and bounded, so the value's offset stops
/// growing after them.
const STEPS: u64 = 64;

#[cfg(target_arch = "x86_64")]
const SYS_TIMES: c_long = 100;
#[cfg(target_arch = "aarch64")]
const SYS_TIMES: c_long = 153;

static CALLS: AtomicU64 = AtomicU64::new(0);

/// `struct tms`: four `clock_t`s, filled in by the kernel.
#[repr(C)]
pub struct Tms {
    utime: c_long,
    stime: c_long,
    cutime: c_long,
    cstime: c_long,
}

#[link(name = "c")]
extern "C" {
    fn syscall(number: c_long, ...) -> c_long;
}

/// # Safety
/// As `times(2)`: `buf` points to a `struct tms` the kernel may write.
#[no_mangle]
pub unsafe extern "C" fn times(buf: *mut Tms) -> c_long {
    // SAFETY: the caller's contract is times(2)'s, which the system call checks itself.
    let real = unsafe { syscall(SYS_TIMES, buf) };
    if real == -1 {
        return real; // errno is the kernel's
    }
    let step = CALLS.fetch_add(1, Ordering::Relaxed).min(STEPS);
    real.wrapping_add(step as c_long)
}

#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    loop {}
}
