//! Validated value types used in config and flags: byte sizes, port ranges, durations.
//! Each parses once, with an error that says what was expected.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::str::FromStr;

/// A size in bytes written the way MySQL and humans write it: `128M`, `20G`, `512MiB`.
/// Suffixes are binary (K = 1024), as in MySQL's own options.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct ByteSize(pub u64);

impl ByteSize {
    pub fn bytes(self) -> u64 {
        self.0
    }
    pub const fn mib(n: u64) -> Self {
        ByteSize(n * 1024 * 1024)
    }
}

impl FromStr for ByteSize {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let t = s.trim();
        if t.is_empty() {
            return Err("a size is empty; write it like 128M, 2G or 512MiB".into());
        }
        let bytes = parse_size::Config::new()
            .with_binary()
            .parse_size(t)
            .map_err(|e| format!("`{s}` is not a size ({e}); write it like 128M, 2G or 512MiB"))?;
        if bytes > MAX_BYTES {
            return Err(format!(
                "`{s}` is more than any host has (at most 1 EiB); write it like 128M, 2G or 512MiB"
            ));
        }
        Ok(ByteSize(bytes))
    }
}

/// The largest size accepted: far above any host, and small enough that sums of a few never
/// overflow (the memory guard adds them; it saturates as well).
pub const MAX_BYTES: u64 = 1 << 60;

/// The longest duration accepted: anything longer is a typo, and a deadline of `now` plus it
/// must stay representable (`Instant + Duration` panics on overflow).
pub const MAX_DURATION: std::time::Duration = std::time::Duration::from_secs(100 * 366 * 86_400);

impl fmt::Display for ByteSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const UNITS: [(&str, u64); 4] = [
            ("T", 1 << 40),
            ("G", 1 << 30),
            ("M", 1 << 20),
            ("K", 1 << 10),
        ];
        for (unit, size) in UNITS {
            if self.0 >= size {
                return if self.0.is_multiple_of(size) {
                    write!(f, "{}{}", self.0 / size, unit)
                } else {
                    write!(f, "{:.1}{}", self.0 as f64 / size as f64, unit)
                };
            }
        }
        write!(f, "{}B", self.0)
    }
}

impl ByteSize {
    /// The exact size in the largest unit that divides it (`128M`, `5000000`): what config
    /// files and records store. `Display` rounds for people (`15.3G`).
    pub fn exact(self) -> String {
        const UNITS: [(&str, u64); 4] = [
            ("T", 1 << 40),
            ("G", 1 << 30),
            ("M", 1 << 20),
            ("K", 1 << 10),
        ];
        UNITS
            .iter()
            .find(|(_, size)| self.0 >= *size && self.0.is_multiple_of(*size))
            .map_or(self.0.to_string(), |(unit, size)| {
                format!("{}{unit}", self.0 / size)
            })
    }
}

impl Serialize for ByteSize {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.exact())
    }
}

impl<'de> Deserialize<'de> for ByteSize {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// An inclusive range of TCP ports, written `3400-3999`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortRange {
    pub first: u16,
    pub last: u16,
}

impl PortRange {
    pub fn iter(self) -> impl Iterator<Item = u16> {
        self.first..=self.last
    }
    pub fn len(self) -> usize {
        usize::from(self.last - self.first) + 1
    }
    pub fn is_empty(self) -> bool {
        false
    }
}

impl FromStr for PortRange {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let bad =
            || format!("`{s}` is not a port range; write it like 3400-3999 (ports 1024-65535)");
        let (a, b) = s.trim().split_once('-').ok_or_else(bad)?;
        let first: u16 = a.trim().parse().map_err(|_| bad())?;
        let last: u16 = b.trim().parse().map_err(|_| bad())?;
        if first < 1024 || first > last {
            return Err(bad());
        }
        Ok(PortRange { first, last })
    }
}

impl fmt::Display for PortRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.first, self.last)
    }
}

impl<'de> Deserialize<'de> for PortRange {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

impl Serialize for PortRange {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

/// A duration written like `90s`, `5m`, `7d`, `1h 30m`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Duration(pub std::time::Duration);

impl FromStr for Duration {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let d = humantime::parse_duration(s.trim()).map_err(|e| {
            format!("`{s}` is not a duration ({e}); write it like 90s, 5m, 12h or 7d")
        })?;
        if d > MAX_DURATION {
            return Err(format!(
                "`{s}` is longer than 100 years; write it like 90s, 5m, 12h or 7d"
            ));
        }
        Ok(Duration(d))
    }
}

impl fmt::Display for Duration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", humantime::format_duration(self.0))
    }
}

impl<'de> Deserialize<'de> for Duration {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

impl Serialize for Duration {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

/// A moment written as RFC 3339 (`2026-12-01T18:00:00Z`) or `2026-12-01 18:00:00` (UTC).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timestamp(pub chrono::DateTime<chrono::Utc>);

impl FromStr for Timestamp {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        humantime::parse_rfc3339_weak(s.trim())
            .map(|t| Timestamp(t.into()))
            .map_err(|e| {
                format!("`{s}` is not a time ({e}); write it like 2026-12-01T18:00:00Z or \"2026-12-01 18:00:00\" (UTC)")
            })
    }
}

impl Duration {
    pub fn chrono(self) -> chrono::Duration {
        chrono::Duration::from_std(self.0).unwrap_or(chrono::Duration::MAX)
    }
    pub fn is_zero(self) -> bool {
        self.0.is_zero()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_are_binary() {
        assert_eq!("128M".parse::<ByteSize>().unwrap().0, 128 << 20);
        assert_eq!("20G".parse::<ByteSize>().unwrap().0, 20 << 30);
        assert_eq!("512MiB".parse::<ByteSize>().unwrap().0, 512 << 20);
        assert_eq!("1024".parse::<ByteSize>().unwrap().0, 1024);
        assert_eq!(ByteSize(128 << 20).to_string(), "128M");
        assert_eq!(ByteSize(1536 << 20).to_string(), "1.5G");
        assert_eq!(ByteSize(57336 << 10).to_string(), "56.0M");
        assert_eq!(ByteSize(512).to_string(), "512B");
    }

    #[test]
    fn bad_sizes_are_refused() {
        for s in ["", "abc", "-1G", "12Q", "1.5.5G"] {
            let e = s.parse::<ByteSize>().unwrap_err();
            assert!(e.contains("128M"), "{s}: {e}");
        }
    }

    #[test]
    fn port_ranges() {
        let r: PortRange = "3400-3999".parse().unwrap();
        assert_eq!((r.first, r.last, r.len()), (3400, 3999, 600));
        for s in ["3400", "4000-3000", "80-90", "a-b", "3400-70000", ""] {
            assert!(s.parse::<PortRange>().is_err(), "{s}");
        }
    }

    proptest::proptest! {
        #[test]
        fn parsers_never_panic(s in "\\PC{0,30}") {
            let _ = s.parse::<ByteSize>();
            let _ = s.parse::<PortRange>();
            let _ = s.parse::<Duration>();
            let _ = s.parse::<Timestamp>();
        }

        #[test]
        fn sizes_round_trip_exactly(n in 0u64..(1 << 50)) {
            let back: ByteSize = ByteSize(n).exact().parse().unwrap();
            proptest::prop_assert_eq!(back, ByteSize(n));
        }

        #[test]
        fn port_ranges_hold_their_bounds(a in 1024u16..65535, len in 0u16..500) {
            let b = a.saturating_add(len);
            let r: PortRange = format!("{a}-{b}").parse().unwrap();
            proptest::prop_assert_eq!((r.first, r.last), (a, b));
            proptest::prop_assert_eq!(r.iter().count(), r.len());
        }
    }

    #[test]
    fn timestamps() {
        let t: Timestamp = "2026-12-01T18:00:00Z".parse().unwrap();
        assert_eq!(t.0.to_rfc3339(), "2026-12-01T18:00:00+00:00");
        assert!("2026-12-01 18:00:00".parse::<Timestamp>().is_ok());
        assert!("tomorrow".parse::<Timestamp>().is_err());
    }

    #[test]
    fn durations() {
        assert_eq!("90s".parse::<Duration>().unwrap().0.as_secs(), 90);
        assert_eq!("7d".parse::<Duration>().unwrap().0.as_secs(), 7 * 86400);
        assert!("soon".parse::<Duration>().is_err());
    }

    #[test]
    fn sizes_and_durations_too_big_to_add_are_refused() {
        assert!("18446744073709551615".parse::<ByteSize>().is_err());
        assert!("16E".parse::<ByteSize>().is_err());
        assert!("1E".parse::<ByteSize>().is_ok());
        assert!("500000000000y".parse::<Duration>().is_err());
        assert!("100y".parse::<Duration>().is_ok());
    }

    proptest::proptest! {
        /// Nothing a user types makes a parser panic; what they accept stays within the
        /// bounds that keep the sums and deadlines built from them in range.
        #[test]
        fn parsers_never_panic_and_stay_in_bounds(text in "\\PC{0,24}") {
            if let Ok(b) = text.parse::<ByteSize>() {
                proptest::prop_assert!(b.0 <= MAX_BYTES);
            }
            if let Ok(d) = text.parse::<Duration>() {
                proptest::prop_assert!(d.0 <= MAX_DURATION);
                proptest::prop_assert!(std::time::Instant::now().checked_add(d.0).is_some());
            }
            let _ = text.parse::<Timestamp>();
        }

        #[test]
        fn numbers_with_units_parse_or_refuse(n in proptest::prelude::any::<u64>(),
                                              unit in "(|K|M|G|T|P|E|KiB|MiB|GiB|s|m|h|d|y)") {
            let text = format!("{n}{unit}");
            if let Ok(b) = text.parse::<ByteSize>() {
                proptest::prop_assert!(b.0 <= MAX_BYTES);
            }
            if let Ok(d) = text.parse::<Duration>() {
                proptest::prop_assert!(d.0 <= MAX_DURATION);
            }
        }
    }
}
