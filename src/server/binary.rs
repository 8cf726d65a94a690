//! The configured server program: what it is (family and version, from `--version`,
//! remembered per binary so hot paths do not run it), its initialiser, its client, and the
//! OS user it runs as.

use super::ServerError;
use crate::exec;
use crate::flavour::{Flavour, Initialiser};
use anyhow::{anyhow, Context, Result};
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

pub struct ServerBinary {
    pub path: PathBuf,
    /// The OS user servers run as.
    pub user: String,
    /// Where `--version` answers are remembered (`root/cache/server-versions.json`); None:
    /// ask every time.
    cache: Option<PathBuf>,
    /// Where MySQL's start-up shim is written for its servers to preload
    /// (`preload::install_ticks_shim`); None: they start without it.
    ticks_shim_dir: Option<PathBuf>,
    flavour: OnceLock<(Flavour, String)>,
}

/// Names the directory of empty-datadir templates that every test root of a run shares, in
/// builds with the `testing` feature: each server's initialiser then runs once per run, not
/// once per test (MySQL's takes seconds, and a minute under the ZFS guest's emulation).
pub const TEMPLATES_ENV: &str = "DB_BRANCH_TEST_TEMPLATES";

/// Where the empty-datadir templates are kept: `cache` (the pool's work directory, so the
/// copy is a reflink), or the test run's shared directory.
fn template_cache(cache: &Path) -> PathBuf {
    #[cfg(feature = "testing")]
    if let Some(dir) = std::env::var_os(TEMPLATES_ENV).filter(|d| !d.is_empty()) {
        return PathBuf::from(dir);
    }
    cache.to_path_buf()
}

impl ServerBinary {
    pub fn new(path: PathBuf, user: String, cache: Option<PathBuf>) -> Self {
        ServerBinary {
            path,
            user,
            cache,
            ticks_shim_dir: None,
            flavour: OnceLock::new(),
        }
    }

    /// Servers of this binary preload the `times()` shim written into `dir` when they are
    /// Oracle MySQL (`mysqld.skip_timer_calibration`); None: never.
    pub fn with_ticks_shim(mut self, dir: Option<PathBuf>) -> Self {
        self.ticks_shim_dir = dir;
        self
    }

    /// The shim a server of `flavour` preloads, written out if missing or stale; None for
    /// MariaDB (whose start calibrates no ticks timer), when turned off, or where this
    /// build has no shim.
    pub fn ticks_shim(&self, flavour: Flavour) -> Result<Option<PathBuf>> {
        match &self.ticks_shim_dir {
            Some(dir) if flavour.is_mysql() => super::preload::install_ticks_shim(dir),
            _ => Ok(None),
        }
    }

    pub fn check(&self) -> Result<()> {
        if !self.path.is_file() {
            return Err(ServerError::BinaryMissing(self.path.clone()).into());
        }
        Ok(())
    }

    /// Identity of the binary file: a reinstalled server gets asked again.
    fn stamp(&self) -> Option<String> {
        let m = fs::metadata(&self.path).ok()?;
        Some(format!(
            "{}:{}:{}:{}",
            m.dev(),
            m.ino(),
            m.size(),
            m.mtime_nsec() + m.mtime() * 1_000_000_000
        ))
    }

    fn cached(&self, stamp: &str) -> Option<String> {
        let text = fs::read_to_string(self.cache.as_ref()?).ok()?;
        let map: serde_json::Map<String, serde_json::Value> = serde_json::from_str(&text).ok()?;
        let entry = map.get(&self.path.display().to_string())?;
        (entry["stamp"].as_str()? == stamp)
            .then(|| entry["version"].as_str().map(str::to_string))?
    }

    fn remember(&self, stamp: &str, line: &str) {
        let Some(cache) = &self.cache else { return };
        let mut map: serde_json::Map<String, serde_json::Value> = fs::read_to_string(cache)
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or_default();
        map.insert(
            self.path.display().to_string(),
            serde_json::json!({ "stamp": stamp, "version": line }),
        );
        if let Some(dir) = cache.parent() {
            let _ = fs::create_dir_all(dir);
        }
        let text = serde_json::to_vec_pretty(&map).unwrap_or_default();
        // A cache: losing a write only costs the next invocation a `--version`.
        let _ = crate::store::files::write_atomic(cache, &text, 0o644);
    }

    /// The `--version` line and what it says.
    fn identify(&self) -> Result<(Flavour, String)> {
        self.check()?;
        let stamp = self.stamp().unwrap_or_default();
        let line = match self.cached(&stamp) {
            Some(line) => line,
            None => {
                let out = exec::run(Command::new(&self.path).arg("--version")).map_err(|e| {
                    ServerError::NotAServer {
                        path: self.path.clone(),
                        output: format!("{e:#}"),
                    }
                })?;
                let line = String::from_utf8_lossy(&out.stdout).trim().to_string();
                if Flavour::from_version_output(&line).is_some() {
                    self.remember(&stamp, &line);
                }
                line
            }
        };
        let flavour =
            Flavour::from_version_output(&line).ok_or_else(|| ServerError::NotAServer {
                path: self.path.clone(),
                output: line.clone(),
            })?;
        Ok((flavour, line))
    }

    pub fn flavour(&self) -> Result<Flavour> {
        if let Some((f, _)) = self.flavour.get() {
            return Ok(*f);
        }
        let id = self.identify()?;
        Ok(self.flavour.get_or_init(|| id).0)
    }

    /// The server's own `--version` line.
    pub fn version_line(&self) -> Result<String> {
        self.flavour()?;
        Ok(self.flavour.get().expect("set above").1.clone())
    }

    pub fn give_to_server_user(&self, path: &Path) -> Result<()> {
        exec::run(
            Command::new("chown")
                .arg("-R")
                .arg(format!("{0}:{0}", self.user))
                .arg(path),
        )
        .map(|_| ())
    }

    /// Makes an empty datadir with the server's own initialiser.
    pub fn initialize(&self, datadir: &Path, tmpdir: &Path) -> Result<()> {
        let flavour = self.flavour()?;
        let mut cmd = match flavour.initialiser() {
            Initialiser::InstallDb => {
                let install_db = self
                    .sibling("mariadb-install-db")
                    .or_else(|| self.sibling("mysql_install_db"))
                    .ok_or_else(|| {
                        anyhow!(
                            "mariadb-install-db not found next to {} (install mariadb-server)",
                            self.path.display()
                        )
                    })?;
                let mut c = Command::new(install_db);
                c.arg("--no-defaults")
                    .arg(format!("--datadir={}", datadir.display()))
                    .arg(format!("--user={}", self.user))
                    .arg("--skip-test-db")
                    .arg("--skip-name-resolve")
                    .arg(format!("--tmpdir={}", tmpdir.display()))
                    .arg("--auth-root-authentication-method=socket");
                c
            }
            Initialiser::InitializeInsecure => {
                let mut c = Command::new(&self.path);
                c.arg("--no-defaults")
                    .arg("--initialize-insecure")
                    .arg(format!("--tmpdir={}", tmpdir.display()))
                    .arg(format!("--datadir={}", datadir.display()))
                    .arg(format!("--user={}", self.user));
                c
            }
        };
        exec::run(&mut cmd).with_context(|| format!("initialising an empty {flavour} datadir"))?;
        Ok(())
    }

    /// An empty datadir, copied from one the initialiser made earlier for this exact server
    /// version (kept in `cache`): the initialiser costs a second or more, a copy a fraction.
    pub fn initialize_cached(&self, datadir: &Path, tmpdir: &Path, cache: &Path) -> Result<()> {
        let cache = &template_cache(cache);
        let flavour = self.flavour()?;
        let tag: String = self
            .version_line()?
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '.' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        let template = cache.join(format!(
            "empty-datadir-{}-{}",
            flavour.family.to_string().to_lowercase(),
            tag.chars()
                .rev()
                .take(80)
                .collect::<String>()
                .chars()
                .rev()
                .collect::<String>()
        ));
        if !template.join("mysql").is_dir() {
            let partial = cache.join(format!(".empty-datadir.{}", std::process::id()));
            let _ = fs::remove_dir_all(&partial);
            // MySQL's --initialize wants to create the datadir itself (or find it empty).
            fs::create_dir_all(cache)?;
            self.give_to_server_user(cache)?;
            self.initialize(&partial, tmpdir)?;
            // Another invocation may have won the race; either copy is good.
            if fs::rename(&partial, &template).is_err() {
                let _ = fs::remove_dir_all(&partial);
            }
        }
        let mut src = template.as_os_str().to_owned();
        src.push("/.");
        exec::run(
            Command::new("cp")
                .args(["-a", "--reflink=auto"])
                .arg(src)
                .arg(datadir),
        )
        .context("copying the empty datadir template")?;
        Ok(())
    }

    /// `name` next to the binary (`…/sbin/mariadbd` → `…/bin/name`), else on PATH.
    pub fn sibling(&self, name: &str) -> Option<PathBuf> {
        let mut dirs: Vec<PathBuf> = Vec::new();
        if let Some(d) = self.path.parent() {
            dirs.push(d.to_path_buf());
            if let Some(prefix) = d.parent() {
                dirs.push(prefix.join("bin"));
            }
        }
        if let Some(path) = std::env::var_os("PATH") {
            dirs.extend(std::env::split_paths(&path));
        }
        dirs.into_iter().map(|d| d.join(name)).find(|p| p.is_file())
    }

    /// The command-line client of this server (it understands DELIMITER and the rest of
    /// what dumps and scripts contain).
    pub fn client_program(&self) -> PathBuf {
        let names: &[&str] = match self.flavour().map(|f| f.family) {
            Ok(crate::flavour::Family::Mysql) => &["mysql", "mariadb"],
            _ => &["mariadb", "mysql"],
        };
        names
            .iter()
            .find_map(|n| self.sibling(n))
            .unwrap_or_else(|| PathBuf::from("mysql"))
    }
}
