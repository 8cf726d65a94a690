//! A readiness check result, reported by `doctor` and produced by the backends that know
//! what they need.

use serde::Serialize;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    Ok,
    Warn,
    Fail,
}

#[derive(Debug, Clone, Serialize)]
pub struct Check {
    pub name: String,
    pub level: Level,
    pub detail: String,
}

impl Check {
    pub fn new(name: &str, level: Level, detail: impl Into<String>) -> Check {
        Check {
            name: name.into(),
            level,
            detail: detail.into(),
        }
    }
    pub fn ok(name: &str, detail: impl Into<String>) -> Check {
        Check::new(name, Level::Ok, detail)
    }
    pub fn warn(name: &str, detail: impl Into<String>) -> Check {
        Check::new(name, Level::Warn, detail)
    }
    pub fn fail(name: &str, detail: impl Into<String>) -> Check {
        Check::new(name, Level::Fail, detail)
    }
}
