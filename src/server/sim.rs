//! In-memory server for unit tests: always ready, records what it was asked to do.

use super::{Preparation, Server};
use crate::flavour::{Family, Flavour};
use crate::printer::PhaseProgress;
use anyhow::{anyhow, Result};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

pub struct SimServer {
    /// What the simulated binary is.
    pub flavour: Mutex<Flavour>,
    pub prepared: Mutex<Vec<String>>,
    pub fail_ready: Mutex<bool>,
    /// Successive answers of `tables`; the last one repeats.
    pub tables: Mutex<Vec<Vec<super::TableInfo>>>,
    pub history: Mutex<super::StatementHistory>,
    /// Per socket path: the sample `activity` returns.
    pub samples:
        Mutex<std::collections::BTreeMap<std::path::PathBuf, crate::branch::ActivitySample>>,
    /// Per socket path: what `schema` and `table_data` return (empty when unset).
    pub schemas: Mutex<std::collections::BTreeMap<std::path::PathBuf, super::schema::Schema>>,
    pub data: Mutex<
        std::collections::BTreeMap<
            std::path::PathBuf,
            std::collections::BTreeMap<String, super::schema::TableData>,
        >,
    >,
    /// Redo-log flushes asked for.
    pub flushes: Mutex<usize>,
    /// Per socket path: how often each dense database was made by a copy there.
    pub dense:
        Mutex<std::collections::BTreeMap<PathBuf, std::collections::BTreeMap<String, usize>>>,
    /// Per socket path: the dense databases that exist there now.
    pub dense_present:
        Mutex<std::collections::BTreeMap<PathBuf, std::collections::BTreeSet<String>>>,
    /// Swaps done.
    pub dense_swaps: Mutex<usize>,
    /// Set: `dense_reset_rows` resets rows (counted here) instead of declining.
    pub dense_row_resets: Mutex<Option<usize>>,
    /// Set: `dense_template` refuses with this reason.
    pub dense_refusal: Mutex<Option<String>>,
    /// Per socket path: what `replica_status` says (set by `follow`; tests break it).
    pub replicas: Mutex<std::collections::BTreeMap<PathBuf, crate::replication::ReplicaStatus>>,
    /// Applier pauses asked for.
    pub pauses: Mutex<usize>,
    /// Set: `follow` fails with this.
    pub follow_refusal: Mutex<Option<String>>,
}

impl Default for SimServer {
    fn default() -> Self {
        SimServer {
            flavour: Mutex::new(Flavour::new(Family::Mariadb, 10, 11, 19)),
            prepared: Mutex::default(),
            fail_ready: Mutex::default(),
            tables: Mutex::default(),
            history: Mutex::default(),
            samples: Mutex::default(),
            schemas: Mutex::default(),
            data: Mutex::default(),
            flushes: Mutex::default(),
            dense: Mutex::default(),
            dense_present: Mutex::default(),
            dense_swaps: Mutex::default(),
            dense_row_resets: Mutex::default(),
            dense_refusal: Mutex::default(),
            replicas: Mutex::default(),
            pauses: Mutex::default(),
            follow_refusal: Mutex::default(),
        }
    }
}

impl Server for SimServer {
    fn dense_template(
        &self,
        _socket: &Path,
        database: &str,
    ) -> Result<super::dense::DenseTemplate> {
        if let Some(why) = self.dense_refusal.lock().unwrap().clone() {
            return Err(crate::error::usage(format!(
                "database {database} cannot be copied into dense slots: {why}"
            )));
        }
        Ok(super::dense::DenseTemplate {
            database: database.to_string(),
            charset: "utf8mb4".into(),
            collation: "utf8mb4_general_ci".into(),
            tables: vec![super::dense::TemplateTable {
                name: "t".into(),
                create: "CREATE TABLE `t` (id INT PRIMARY KEY)".into(),
                columns: vec!["id".into()],
            }],
            foreign_keys: false,
        })
    }

    fn dense_copy(
        &self,
        socket: &Path,
        _datadir: &Path,
        _template: &super::dense::DenseTemplate,
        database: &str,
    ) -> Result<()> {
        *self
            .dense
            .lock()
            .unwrap()
            .entry(socket.to_path_buf())
            .or_default()
            .entry(database.to_string())
            .or_default() += 1;
        self.dense_present
            .lock()
            .unwrap()
            .entry(socket.to_path_buf())
            .or_default()
            .insert(database.to_string());
        Ok(())
    }

    fn dense_account(&self, _socket: &Path, _slot: &super::dense::DenseSlot) -> Result<()> {
        Ok(())
    }

    fn dense_end_sessions(&self, _socket: &Path, _user: &str) -> Result<()> {
        Ok(())
    }

    fn dense_swap(
        &self,
        socket: &Path,
        _template: &super::dense::DenseTemplate,
        slot: &super::dense::DenseSlot,
        spare: &str,
        trash: &str,
    ) -> Result<super::dense::Swap> {
        let mut present = self.dense_present.lock().unwrap();
        let dbs = present.entry(socket.to_path_buf()).or_default();
        if !dbs.remove(spare) {
            return Ok(super::dense::Swap::NoSpare);
        }
        dbs.insert(slot.database.clone());
        dbs.insert(trash.to_string());
        *self.dense_swaps.lock().unwrap() += 1;
        Ok(super::dense::Swap::Swapped)
    }

    fn dense_reset_rows(
        &self,
        _socket: &Path,
        _datadir: &Path,
        _template: &super::dense::DenseTemplate,
        _slot: &super::dense::DenseSlot,
    ) -> Result<super::dense::RowReset> {
        Ok(match self.dense_row_resets.lock().unwrap().as_mut() {
            Some(n) => {
                *n += 1;
                super::dense::RowReset::Done
            }
            None => super::dense::RowReset::Declined("the sim declines".into()),
        })
    }

    fn dense_drop(&self, socket: &Path, database: &str) -> Result<()> {
        if let Some(dbs) = self.dense_present.lock().unwrap().get_mut(socket) {
            dbs.remove(database);
        }
        Ok(())
    }

    fn version(&self) -> Result<String> {
        Ok("sim 1.0".into())
    }
    fn flavour(&self) -> Result<Flavour> {
        Ok(*self.flavour.lock().unwrap())
    }
    fn client_program(&self) -> PathBuf {
        PathBuf::from("/usr/bin/mariadb")
    }

    /// None: the sim runs no process, and what doctor says must not depend on the host.
    fn fsync_free_library(&self) -> Option<PathBuf> {
        None
    }
    fn ticks_shim(&self) -> Result<Option<PathBuf>> {
        Ok(None)
    }
    fn prepare_runtime_dir(&self, dir: &Path) -> Result<()> {
        std::fs::create_dir_all(dir)?;
        Ok(())
    }
    fn adopt_datadir(&self, _datadir: &Path) -> Result<bool> {
        Ok(false)
    }
    fn wait_ready(
        &self,
        _socket: &Path,
        _log: &Path,
        _timeout: Duration,
        alive: &dyn Fn() -> bool,
    ) -> Result<()> {
        if *self.fail_ready.lock().unwrap() || !alive() {
            return Err(anyhow!("simulated server that never answers"));
        }
        Ok(())
    }
    fn prepare_baseline(
        &self,
        datadir: &Path,
        _work: &Path,
        _prep: &Preparation,
        _progress: &PhaseProgress,
    ) -> Result<Flavour> {
        self.prepared
            .lock()
            .unwrap()
            .push(datadir.display().to_string());
        self.flavour()
    }

    fn activity(&self, socket: &Path) -> Result<crate::branch::ActivitySample> {
        self.samples
            .lock()
            .unwrap()
            .get(socket)
            .copied()
            .ok_or_else(|| anyhow!("simulated server at {} is not running", socket.display()))
    }

    fn instrumentation_memory(&self) -> u64 {
        64 << 20
    }
    fn instrumentation_options(&self) -> Vec<String> {
        vec!["sim-instrumentation=ON".into()]
    }
    fn tables(&self, _socket: &Path) -> Result<Vec<super::TableInfo>> {
        let mut answers = self.tables.lock().unwrap();
        Ok(if answers.len() > 1 {
            answers.remove(0)
        } else {
            answers.first().cloned().unwrap_or_default()
        })
    }
    fn flush_logs(&self, _socket: &Path) -> Result<()> {
        *self.flushes.lock().unwrap() += 1;
        Ok(())
    }
    fn follow(&self, socket: &Path, source: &crate::replication::ReplicaSource) -> Result<()> {
        if let Some(why) = self.follow_refusal.lock().unwrap().clone() {
            return Err(anyhow!("{why}"));
        }
        self.replicas.lock().unwrap().insert(
            socket.to_path_buf(),
            crate::replication::ReplicaStatus {
                receiving: true,
                applying: true,
                lag_seconds: Some(0),
                position: source.position.clone(),
                last_error: None,
            },
        );
        Ok(())
    }
    fn start_replication(
        &self,
        socket: &Path,
        _source: &crate::replication::ReplicaSource,
    ) -> Result<()> {
        let mut replicas = self.replicas.lock().unwrap();
        let r = replicas
            .get_mut(socket)
            .ok_or_else(|| anyhow!("no replication on {}", socket.display()))?;
        r.receiving = true;
        r.applying = true;
        Ok(())
    }
    fn replica_status(&self, socket: &Path) -> Result<crate::replication::ReplicaStatus> {
        self.replicas
            .lock()
            .unwrap()
            .get(socket)
            .cloned()
            .ok_or_else(|| anyhow!("no replication on {}", socket.display()))
    }
    fn pause_applier(&self, socket: &Path) -> Result<String> {
        *self.pauses.lock().unwrap() += 1;
        let mut replicas = self.replicas.lock().unwrap();
        let r = replicas
            .get_mut(socket)
            .ok_or_else(|| anyhow!("no replication on {}", socket.display()))?;
        r.applying = false;
        Ok(r.position.clone())
    }
    fn resume_applier(&self, socket: &Path) -> Result<()> {
        if let Some(r) = self.replicas.lock().unwrap().get_mut(socket) {
            r.applying = true;
        }
        Ok(())
    }
    fn schema(&self, socket: &Path) -> Result<super::schema::Schema> {
        Ok(self
            .schemas
            .lock()
            .unwrap()
            .get(socket)
            .cloned()
            .unwrap_or_default())
    }
    fn table_data(
        &self,
        socket: &Path,
    ) -> Result<std::collections::BTreeMap<String, super::schema::TableData>> {
        Ok(self
            .data
            .lock()
            .unwrap()
            .get(socket)
            .cloned()
            .unwrap_or_default())
    }
    fn statement_history(&self, _socket: &Path) -> Result<super::StatementHistory> {
        Ok(self.history.lock().unwrap().clone())
    }
}
