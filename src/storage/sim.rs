//! In-memory storage for unit tests of command logic. Can be told to fail one operation.

use super::{PoolInfo, Storage};
use crate::branch::{BranchName, CheckpointTag, Generation, TrashId};
use anyhow::{anyhow, Result};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

#[derive(Default)]
pub struct SimStorage {
    state: Mutex<SimState>,
}

#[derive(Default, Debug)]
pub struct SimState {
    pub prepared: bool,
    pub generations: BTreeSet<Generation>,
    pub workspaces: BTreeSet<Generation>,
    /// name -> (generation, written since clone or rollback)
    pub branches: BTreeMap<BranchName, (Generation, bool)>,
    /// Operation name that fails once, e.g. "clone_branch".
    pub fail_once: Option<&'static str>,
    pub rollbacks: usize,
    pub ram_backed: bool,
    /// What each generation says made it; set by tests and `seal_baseline`.
    pub infos: BTreeMap<Generation, super::GenerationInfo>,
    /// Metadata kept with storage (as ZFS does); set by tests.
    pub metadata: BTreeMap<BranchName, BTreeMap<String, String>>,
    /// Checkpoints: (branch, tag) -> whether the branch had been written when it was taken.
    pub checkpoints: BTreeMap<(BranchName, CheckpointTag), bool>,
    /// A generation received and not yet committed: (generation, the stream's bytes).
    pub receiving: Option<(Generation, Vec<u8>)>,
    /// The trash: entry -> (generation, written, checkpoints with their written flag).
    pub trash: BTreeMap<TrashId, SimTrashed>,
    /// Bytes each trash entry holds (as `trashed_usage` reports); set by tests.
    pub trash_bytes: BTreeMap<TrashId, u64>,
    /// Free space `info` reports (None: 512 MiB); a purge of the trash gives its bytes back.
    pub free_bytes: Option<u64>,
}

/// A branch as the sim's trash keeps it.
#[derive(Debug, Clone)]
pub struct SimTrashed {
    pub branch: (Generation, bool),
    pub checkpoints: Vec<(CheckpointTag, bool)>,
}

impl SimStorage {
    /// A pool holding generation `gen`, made by the sim server's default flavour.
    pub fn with_generation(gen: u32) -> Self {
        let s = SimStorage::default();
        let mut st = s.state.lock().unwrap();
        st.generations.insert(Generation(gen));
        st.infos.insert(
            Generation(gen),
            super::GenerationInfo {
                server: crate::server::sim::SimServer::default()
                    .flavour
                    .into_inner()
                    .unwrap(),
                created: chrono::DateTime::UNIX_EPOCH,
                source: "sim".into(),
                origin_identity: None,
                databases: Some(vec!["shop".into()]),
                followed: None,
            },
        );
        drop(st);
        s
    }
    pub fn fail_once(&self, op: &'static str) {
        self.state.lock().unwrap().fail_once = Some(op);
    }
    pub fn with_state<R>(&self, f: impl FnOnce(&mut SimState) -> R) -> R {
        f(&mut self.state.lock().unwrap())
    }
    fn check(&self, op: &'static str) -> Result<std::sync::MutexGuard<'_, SimState>> {
        let mut st = self.state.lock().unwrap();
        if st.fail_once == Some(op) {
            st.fail_once = None;
            return Err(anyhow!("simulated failure in {op}"));
        }
        Ok(st)
    }
}

/// The sim's "send stream": a line naming the generation and its parent.
pub fn sim_stream(gen: Generation, parent: Option<Generation>) -> Vec<u8> {
    format!("sim stream of {gen} on {parent:?}\n").into_bytes()
}

impl super::Transfer for SimStorage {
    fn stream_format(&self) -> &'static str {
        "sim"
    }
    fn generation_identity(&self, gen: Generation) -> Result<Option<String>> {
        let st = self.check("generation_identity")?;
        Ok(st
            .generations
            .contains(&gen)
            .then(|| format!("sim-{}", gen.0)))
    }
    fn send_generation(
        &self,
        gen: Generation,
        parent: Option<Generation>,
        out: &mut dyn std::io::Write,
    ) -> Result<()> {
        let st = self.check("send_generation")?;
        if !st.generations.contains(&gen) {
            return Err(anyhow!("no generation {gen}"));
        }
        drop(st);
        out.write_all(&sim_stream(gen, parent))?;
        Ok(())
    }
    fn receive_generation(
        &self,
        gen: Generation,
        _parent: Option<Generation>,
        input: &mut dyn std::io::Read,
    ) -> Result<()> {
        let mut bytes = Vec::new();
        input.read_to_end(&mut bytes)?;
        let mut st = self.check("receive_generation")?;
        st.receiving = Some((gen, bytes));
        Ok(())
    }
    fn commit_received(&self, gen: Generation) -> Result<()> {
        let mut st = self.check("commit_received")?;
        st.receiving = None;
        st.generations.insert(gen);
        Ok(())
    }
    fn abort_received(&self) -> Result<()> {
        self.check("abort_received")?.receiving = None;
        Ok(())
    }
    fn partial_receives(&self) -> Result<Vec<String>> {
        let st = self.check("partial_receives")?;
        Ok(st.receiving.iter().map(|(g, _)| g.to_string()).collect())
    }
}

impl Storage for SimStorage {
    fn send_files(&self, gen: Generation, out: &mut dyn std::io::Write) -> Result<()> {
        super::Transfer::send_generation(self, gen, None, out)
    }
    fn receive_files(&self, gen: Generation, input: &mut dyn std::io::Read) -> Result<PathBuf> {
        let mut bytes = Vec::new();
        input.read_to_end(&mut bytes)?;
        self.begin_baseline(gen)
    }
    fn open(&self) -> Result<()> {
        let _state = self.check("open")?;
        Ok(())
    }
    fn init(&self) -> Result<bool> {
        let mut st = self.check("init")?;
        let new = !st.prepared;
        st.prepared = true;
        Ok(new)
    }
    fn generation_dir(&self, gen: Generation) -> PathBuf {
        PathBuf::from("/sim/baselines").join(gen.dir_name())
    }
    fn write_generation_info(
        &self,
        gen: Generation,
        _workspace: &Path,
        info: &super::GenerationInfo,
    ) -> Result<()> {
        self.state.lock().unwrap().infos.insert(gen, info.clone());
        Ok(())
    }
    fn generation_info(&self, gen: Generation) -> Result<Option<super::GenerationInfo>> {
        Ok(self.state.lock().unwrap().infos.get(&gen).cloned())
    }
    fn ram_backed(&self) -> bool {
        self.state.lock().unwrap().ram_backed
    }
    fn info(&self) -> Result<PoolInfo> {
        let free_bytes = self.state.lock().unwrap().free_bytes.unwrap_or(1 << 29);
        Ok(PoolInfo {
            kind: "sim".into(),
            path: PathBuf::from("/sim"),
            total_bytes: 1 << 30,
            free_bytes,
            ram_backed: self.ram_backed(),
            ram_bytes: None,
        })
    }
    fn baselines(&self) -> Result<Vec<Generation>> {
        Ok(self
            .state
            .lock()
            .unwrap()
            .generations
            .iter()
            .copied()
            .collect())
    }
    fn begin_baseline(&self, gen: Generation) -> Result<PathBuf> {
        self.check("begin_baseline")?.workspaces.insert(gen);
        Ok(PathBuf::from(format!("/sim/baselines/building-{gen}")))
    }
    fn fill_from_dir(&self, _workspace: &Path, _source: &Path) -> Result<()> {
        self.check("fill_from_dir").map(|_| ())
    }
    fn seal_baseline(&self, gen: Generation) -> Result<()> {
        let mut st = self.check("seal_baseline")?;
        if !st.workspaces.remove(&gen) {
            return Err(anyhow!("no workspace for {gen}"));
        }
        st.generations.insert(gen);
        Ok(())
    }
    fn workspaces(&self) -> Result<Vec<Generation>> {
        Ok(self
            .state
            .lock()
            .unwrap()
            .workspaces
            .iter()
            .copied()
            .collect())
    }
    fn abandon_baseline(&self, gen: Generation) -> Result<()> {
        self.check("abandon_baseline")?.workspaces.remove(&gen);
        Ok(())
    }
    fn clone_branch(&self, gen: Generation, name: &BranchName) -> Result<PathBuf> {
        let mut st = self.check("clone_branch")?;
        if !st.generations.contains(&gen) {
            return Err(anyhow!("baseline {gen} does not exist"));
        }
        st.branches.insert(name.clone(), (gen, false));
        Ok(self.branch_datadir(name))
    }
    fn rollback_branch(&self, name: &BranchName) -> Result<()> {
        let mut st = self.check("rollback_branch")?;
        st.rollbacks += 1;
        match st.branches.get_mut(name) {
            Some(b) => {
                b.1 = false;
                Ok(())
            }
            None => Err(anyhow!("no branch {name}")),
        }
    }
    fn destroy_branch(&self, name: &BranchName) -> Result<()> {
        let mut st = self.check("destroy_branch")?;
        st.branches.remove(name);
        st.checkpoints.retain(|(n, _), _| n != name);
        Ok(())
    }
    fn clone_from_branch(
        &self,
        source: &BranchName,
        tag: Option<&CheckpointTag>,
        name: &BranchName,
    ) -> Result<PathBuf> {
        let mut st = self.check("clone_from_branch")?;
        let (gen, written) = *st
            .branches
            .get(source)
            .ok_or_else(|| anyhow!("no branch {source}"))?;
        let written = match tag {
            Some(t) => *st
                .checkpoints
                .get(&(source.clone(), t.clone()))
                .ok_or_else(|| anyhow!("no checkpoint {source}@{t}"))?,
            None => written,
        };
        st.branches.insert(name.clone(), (gen, written));
        Ok(self.branch_datadir(name))
    }
    fn checkpoint_branch(&self, name: &BranchName, tag: &CheckpointTag) -> Result<()> {
        let mut st = self.check("checkpoint_branch")?;
        let written = st
            .branches
            .get(name)
            .ok_or_else(|| anyhow!("no branch {name}"))?
            .1;
        if st.checkpoints.contains_key(&(name.clone(), tag.clone())) {
            return Err(anyhow!("checkpoint {name}@{tag} already exists"));
        }
        st.checkpoints.insert((name.clone(), tag.clone()), written);
        Ok(())
    }
    fn rollback_to_checkpoint(&self, name: &BranchName, tag: &CheckpointTag) -> Result<()> {
        let mut st = self.check("rollback_to_checkpoint")?;
        let written = *st
            .checkpoints
            .get(&(name.clone(), tag.clone()))
            .ok_or_else(|| anyhow!("no checkpoint {name}@{tag}"))?;
        st.rollbacks += 1;
        match st.branches.get_mut(name) {
            Some(b) => {
                b.1 = written;
                Ok(())
            }
            None => Err(anyhow!("no branch {name}")),
        }
    }
    fn remove_checkpoint(&self, name: &BranchName, tag: &CheckpointTag) -> Result<()> {
        self.check("remove_checkpoint")?
            .checkpoints
            .remove(&(name.clone(), tag.clone()));
        Ok(())
    }
    fn checkpoints(&self, name: &BranchName) -> Result<Vec<CheckpointTag>> {
        Ok(self
            .state
            .lock()
            .unwrap()
            .checkpoints
            .keys()
            .filter(|(n, _)| n == name)
            .map(|(_, t)| t.clone())
            .collect())
    }
    fn has_trash(&self) -> bool {
        true
    }
    fn trash_branch(&self, name: &BranchName, id: &TrashId) -> Result<()> {
        let mut st = self.check("trash_branch")?;
        let checkpoints: Vec<(CheckpointTag, bool)> = st
            .checkpoints
            .iter()
            .filter(|((n, _), _)| n == name)
            .map(|((_, t), w)| (t.clone(), *w))
            .collect();
        st.checkpoints.retain(|(n, _), _| n != name);
        if let Some(branch) = st.branches.remove(name) {
            st.trash.insert(
                id.clone(),
                SimTrashed {
                    branch,
                    checkpoints,
                },
            );
        }
        Ok(())
    }
    fn restore_trashed(&self, id: &TrashId, name: &BranchName) -> Result<()> {
        let mut st = self.check("restore_trashed")?;
        let Some(t) = st.trash.remove(id) else {
            return if st.branches.contains_key(name) {
                Ok(())
            } else {
                Err(anyhow!("no trash entry {id}"))
            };
        };
        st.branches.insert(name.clone(), t.branch);
        for (tag, w) in t.checkpoints {
            st.checkpoints.insert((name.clone(), tag), w);
        }
        Ok(())
    }
    fn purge_trashed(&self, id: &TrashId) -> Result<()> {
        let mut st = self.check("purge_trashed")?;
        st.trash.remove(id);
        let freed = st.trash_bytes.remove(id).unwrap_or(0);
        if let Some(f) = st.free_bytes.as_mut() {
            *f += freed;
        }
        Ok(())
    }
    fn trashed(&self) -> Result<Vec<TrashId>> {
        Ok(self.state.lock().unwrap().trash.keys().cloned().collect())
    }
    fn trashed_usage(&self, id: &TrashId) -> Result<Option<u64>> {
        let st = self.state.lock().unwrap();
        Ok(st
            .trash
            .contains_key(id)
            .then(|| st.trash_bytes.get(id).copied().unwrap_or(1 << 20)))
    }
    fn branch_from_workspace(&self, gen: Generation, name: &BranchName) -> Result<PathBuf> {
        let mut st = self.check("branch_from_workspace")?;
        if !st.workspaces.remove(&gen) {
            return Err(anyhow!("no workspace for {gen}"));
        }
        st.branches.insert(name.clone(), (gen, false));
        Ok(self.branch_datadir(name))
    }
    fn begin_baseline_from_branch(&self, gen: Generation, name: &BranchName) -> Result<PathBuf> {
        let mut st = self.check("begin_baseline_from_branch")?;
        if !st.branches.contains_key(name) {
            return Err(anyhow!("no branch {name}"));
        }
        st.workspaces.insert(gen);
        Ok(PathBuf::from(format!("/sim/baselines/building-{gen}")))
    }
    fn branch_exists(&self, name: &BranchName) -> Result<bool> {
        Ok(self.state.lock().unwrap().branches.contains_key(name))
    }
    fn branch_datadir(&self, name: &BranchName) -> PathBuf {
        PathBuf::from(format!("/sim/branches/{name}"))
    }
    fn branch_usage(&self, name: &BranchName) -> Result<Option<u64>> {
        Ok(self
            .state
            .lock()
            .unwrap()
            .branches
            .get(name)
            .map(|b| if b.1 { 1 << 20 } else { 0 }))
    }
    fn branches(&self) -> Result<Vec<BranchName>> {
        Ok(self
            .state
            .lock()
            .unwrap()
            .branches
            .keys()
            .cloned()
            .collect())
    }

    fn get_branch_metadata(&self, name: &BranchName) -> Result<BTreeMap<String, String>> {
        Ok(self
            .state
            .lock()
            .unwrap()
            .metadata
            .get(name)
            .cloned()
            .unwrap_or_default())
    }

    fn remove_baseline(&self, gen: Generation) -> Result<()> {
        let mut st = self.check("remove_baseline")?;
        if st.branches.values().any(|(g, _)| *g == gen) {
            return Err(anyhow!("baseline {gen} is held by branches"));
        }
        st.generations.remove(&gen);
        Ok(())
    }

    fn readiness(&self) -> Vec<crate::check::Check> {
        vec![crate::check::Check::ok("storage", "sim")]
    }
}
