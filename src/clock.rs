//! Time, behind a trait so time-based logic can be tested with a fixed clock.

use chrono::{DateTime, Utc};
#[cfg(any(test, feature = "testing"))]
use std::sync::Mutex;

pub trait Clock: Send + Sync {
    fn now(&self) -> DateTime<Utc>;
}

pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }
}

/// `DB_BRANCH_FAKE_NOW` (RFC 3339): run as if it were that moment. A testing hook for the
/// time-based commands (`stop-idle`, `gc`, expiry, protection) against real servers, only
/// in builds with the `testing` feature: a stray variable must never make the shipped
/// binary's `gc` delete live branches.
pub const FAKE_NOW_ENV: &str = "DB_BRANCH_FAKE_NOW";

#[cfg(not(feature = "testing"))]
pub fn from_env() -> anyhow::Result<Box<dyn Clock>> {
    Ok(Box::new(SystemClock))
}

#[cfg(feature = "testing")]
pub fn from_env() -> anyhow::Result<Box<dyn Clock>> {
    match std::env::var(FAKE_NOW_ENV) {
        Ok(s) if !s.is_empty() => {
            let t = DateTime::parse_from_rfc3339(&s).map_err(|e| {
                crate::error::usage(format!("{FAKE_NOW_ENV}={s:?} is not an RFC 3339 time: {e}"))
            })?;
            Ok(Box::new(SimClock(Mutex::new(t.with_timezone(&Utc)))))
        }
        _ => Ok(Box::new(SystemClock)),
    }
}

#[cfg(any(test, feature = "testing"))]
pub struct SimClock(pub Mutex<DateTime<Utc>>);

#[cfg(any(test, feature = "testing"))]
impl Clock for SimClock {
    fn now(&self) -> DateTime<Utc> {
        *self.0.lock().unwrap()
    }
}
