use crate::branch::BranchName;
use crate::cli::DeleteArgs;
use crate::host::Host;
use crate::ops::delete::{delete, Outcome};
use crate::store::trash::Reason;
use crate::view::branch::DeleteView;
use anyhow::Result;

pub fn run(host: &Host, args: &DeleteArgs) -> Result<()> {
    let name = &args.name;
    confirm(host, name)?;
    let children: Vec<String> = crate::store::records::list(&host.layout)?
        .into_iter()
        .filter(|r| {
            matches!(&r.parent, Some(crate::branch::Parent::Branch { name: p, .. }) if p == name)
        })
        .map(|r| r.name.to_string())
        .collect();
    let outcome = delete(host, name, args.force, Reason::Delete)?;
    let deleted = outcome != Outcome::NothingThere;
    if deleted && !children.is_empty() {
        // Copy-on-write copies share blocks, not dependencies: nothing to move or keep.
        host.printer.note(format!(
            "branches made from {name} keep all their data and checkpoints: {}",
            children.join(", ")
        ));
    }
    host.printer.note(match &outcome {
        Outcome::Trashed(e) => format!(
            "deleted branch {name}; it stays in the trash until {} (`db-branch restore {name}` brings it back)",
            e.keep_until.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
        ),
        Outcome::Destroyed => format!("deleted branch {name}"),
        Outcome::NothingThere => format!("branch {name} does not exist; nothing to delete"),
    });
    let trashed = match outcome {
        Outcome::Trashed(e) => Some(e),
        _ => None,
    };
    host.printer.emit(&DeleteView {
        name: name.clone(),
        deleted,
        trash_id: trashed.as_ref().map(|e| e.id.clone()),
        keep_until: trashed.map(|e| e.keep_until),
    })
}

/// Asks on a terminal; without one, `--yes` must say it.
fn confirm(host: &Host, name: &BranchName) -> Result<()> {
    if crate::ops::branch::dispose::keeps(host) {
        return host.printer.confirm(
            host.assume_yes,
            &format!(
                "Delete branch {name}? It stays in the trash for {} (lifecycle.keep_deleted).",
                host.config.lifecycle.keep_deleted
            ),
            &format!("deleting branch {name} stops it and moves it to the trash"),
        );
    }
    host.printer.confirm(
        host.assume_yes,
        &format!("Delete branch {name} and all its data?"),
        &format!("deleting branch {name} destroys its data"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::testing::{name, sim_host};
    use std::io::IsTerminal;

    #[test]
    fn without_terminal_or_yes_it_refuses_before_touching_anything() {
        let mut sim = sim_host();
        sim.host.assume_yes = false;
        // Test runners give no terminal on stdin.
        if std::io::stdin().is_terminal() {
            return;
        }
        let e = confirm(&sim.host, &name("a")).unwrap_err();
        assert!(e.to_string().contains("--yes"));
    }
}
