//! The files that make the service reachable: its unit, the system bus's policy for its
//! name, and the bus activation file. `init` installs them where systemd is the service
//! manager (and `[access] service` is on); the Debian package ships them.

use std::path::{Path, PathBuf};

pub const UNIT_TEMPLATE: &str = include_str!("../../units/db-branchd.service");
pub const BUS_POLICY: &str = include_str!("../../packaging/dbus/io.dbbranch.Manager1.conf");
pub const BUS_ACTIVATION: &str = include_str!("../../packaging/dbus/io.dbbranch.Manager1.service");

/// Where the system bus reads policies and activation files.
pub const BUS_POLICY_DIR: &str = "/etc/dbus-1/system.d";
pub const BUS_SERVICES_DIR: &str = "/usr/share/dbus-1/system-services";

/// The service's unit with db-branch's path and the config file (when not the default).
pub fn unit(bin: &Path, config: Option<&Path>) -> String {
    let config_args = config.map_or(String::new(), |c| format!("--config {} ", c.display()));
    UNIT_TEMPLATE
        .replace("@BIN@", &bin.display().to_string())
        .replace("@CONFIG_ARGS@", &config_args)
}

/// (path, text) of the bus's files for the service.
pub fn bus_files() -> Vec<(PathBuf, String)> {
    vec![
        (
            Path::new(BUS_POLICY_DIR).join(format!("{}.conf", super::BUS_NAME)),
            BUS_POLICY.to_string(),
        ),
        (
            Path::new(BUS_SERVICES_DIR).join(format!("{}.service", super::BUS_NAME)),
            BUS_ACTIVATION.to_string(),
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_unit_runs_this_binary_with_its_config() {
        let u = unit(
            Path::new("/opt/x/db-branch"),
            Some(Path::new("/etc/x.toml")),
        );
        assert!(u.contains("ExecStart=/opt/x/db-branch --config /etc/x.toml daemon\n"));
        assert!(u.contains("BusName=io.dbbranch.Manager1\n"));
        let u = unit(Path::new("/usr/bin/db-branch"), None);
        assert!(u.contains("ExecStart=/usr/bin/db-branch daemon\n"));
        assert!(!u.contains("@BIN@") && !u.contains("@CONFIG_ARGS@"));
    }

    #[test]
    fn the_packaged_unit_is_the_rendered_template() {
        assert_eq!(
            unit(Path::new("/usr/bin/db-branch"), None),
            include_str!("../../packaging/db-branchd.service"),
            "regenerate packaging/db-branchd.service from units/db-branchd.service"
        );
    }

    #[test]
    fn only_root_owns_the_name_and_activation_goes_through_systemd() {
        let files = bus_files();
        assert!(files[0].1.contains(r#"<policy user="root">"#));
        assert!(files[0]
            .1
            .contains(r#"<allow own="io.dbbranch.Manager1"/>"#));
        assert!(files[1].1.contains("SystemdService=db-branchd.service"));
    }
}
