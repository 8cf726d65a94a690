//! TLS for branches other machines can reach (`bind_address` not loopback): a certificate
//! authority of this host, made once under `root/tls/` (its key root's alone), and a server
//! certificate per branch, for the address it listens on, next to the branch's password.

use super::files::write_atomic;
use crate::branch::BranchName;
use crate::layout::Layout;
use anyhow::{Context, Result};
use rcgen::{
    BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose, SanType,
};
use std::fs;
use std::net::IpAddr;
use std::path::PathBuf;

/// What a branch's server and its clients need.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    pub ca: PathBuf,
    pub cert: PathBuf,
    pub key: PathBuf,
}

/// Whether branches listening on `addr` get TLS (and require it).
pub fn needed(addr: IpAddr) -> bool {
    !addr.is_loopback()
}

/// The CA's distinguished name: the same every time, so an issuer can be rebuilt from the
/// stored key without parsing the certificate.
fn ca_params(layout: &Layout) -> Result<CertificateParams> {
    let mut p = CertificateParams::new(Vec::<String>::new())?;
    p.distinguished_name
        .push(DnType::OrganizationName, "db-branch");
    p.distinguished_name.push(
        DnType::CommonName,
        format!("db-branch CA for {}", layout.root().display()),
    );
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    p.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    Ok(p)
}

/// Makes this host's CA unless it exists: `root/tls/ca.pem` (public) and `ca.key` (0600).
pub fn ensure_ca(layout: &Layout) -> Result<PathBuf> {
    let (cert, key) = (layout.tls_ca_cert(), layout.tls_ca_key());
    if cert.exists() && key.exists() {
        return Ok(cert);
    }
    let dir = layout.tls_dir();
    fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let pair = KeyPair::generate().context("making the CA's key")?;
    let ca = ca_params(layout)?
        .self_signed(&pair)
        .context("signing the CA's certificate")?;
    write_atomic(&key, pair.serialize_pem().as_bytes(), 0o600)?;
    write_atomic(&cert, ca.pem().as_bytes(), 0o644)?;
    Ok(cert)
}

/// A server certificate for the branch at `addr` (and at `advertised`, the name or address
/// other machines use, when set), signed by the CA (made first if need be); its key
/// readable by the server's group only. Made again at each start: cheap, and always for
/// the address the branch listens on now.
pub fn branch_files(
    layout: &Layout,
    name: &BranchName,
    addr: IpAddr,
    advertised: &str,
    server_gid: Option<u32>,
) -> Result<TlsFiles> {
    let ca = ensure_ca(layout)?;
    let ca_key = fs::read_to_string(layout.tls_ca_key())
        .with_context(|| format!("reading {}", layout.tls_ca_key().display()))?;
    let ca_key = KeyPair::from_pem(&ca_key).context("reading the CA's key")?;
    let issuer = Issuer::new(ca_params(layout)?, ca_key);
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    params
        .distinguished_name
        .push(DnType::CommonName, format!("db-branch {name}"));
    params.subject_alt_names = vec![SanType::IpAddress(addr)];
    match advertised.parse::<IpAddr>() {
        Ok(ip) if ip != addr => params.subject_alt_names.push(SanType::IpAddress(ip)),
        Ok(_) => {}
        Err(_) if !advertised.is_empty() => {
            params
                .subject_alt_names
                .push(SanType::DnsName(advertised.try_into().with_context(
                    || format!("advertise_address {advertised:?} as a certificate name"),
                )?))
        }
        Err(_) => {}
    }
    let pair = KeyPair::generate().context("making the branch's key")?;
    let cert = params
        .signed_by(&pair, &issuer)
        .context("signing the branch's certificate")?;
    let dir = layout.secrets_dir(name);
    write_server_pair(&dir, ca, &cert.pem(), &pair, server_gid)
}

/// Writes a server's `server.pem` (public) and `server.key` (readable by the server's
/// group) into `dir`.
fn write_server_pair(
    dir: &std::path::Path,
    ca: PathBuf,
    cert_pem: &str,
    pair: &KeyPair,
    server_gid: Option<u32>,
) -> Result<TlsFiles> {
    let files = TlsFiles {
        ca,
        cert: dir.join("server.pem"),
        key: dir.join("server.key"),
    };
    write_atomic(&files.cert, cert_pem.as_bytes(), 0o644)?;
    write_atomic(&files.key, pair.serialize_pem().as_bytes(), 0o640)?;
    if let Some(gid) = server_gid {
        nix::unistd::chown(&files.key, None, Some(nix::unistd::Gid::from_raw(gid)))
            .with_context(|| format!("giving {} to gid {gid}", files.key.display()))?;
    }
    Ok(files)
}

/// A self-signed certificate and key in `dir` (the key readable by the server's group),
/// for a server nobody else reaches — the one-off servers that prepare baselines — so that
/// MariaDB ≥ 11.4 does not make itself an RSA key at start (`Flavour::makes_certificate_at_start`)
/// while its own client, which requires TLS by default even over the socket, still finds it.
pub fn self_signed_files(dir: &std::path::Path, server_gid: Option<u32>) -> Result<TlsFiles> {
    let mut params = CertificateParams::new(vec!["localhost".to_string()])?;
    params
        .distinguished_name
        .push(DnType::CommonName, "db-branch one-off server");
    let pair = KeyPair::generate().context("making a key")?;
    let cert = params.self_signed(&pair).context("signing a certificate")?;
    // Its own CA.
    write_server_pair(dir, dir.join("server.pem"), &cert.pem(), &pair, server_gid)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_self_signed_pair_for_a_one_off_server() {
        let dir = tempfile::tempdir().unwrap();
        let f = self_signed_files(dir.path(), None).unwrap();
        assert_eq!(f.ca, f.cert, "its own CA");
        assert!(fs::read_to_string(&f.cert)
            .unwrap()
            .starts_with("-----BEGIN CERTIFICATE-----"));
        use std::os::unix::fs::PermissionsExt;
        let mode = fs::metadata(&f.key).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o640);
    }

    #[test]
    fn only_addresses_off_loopback_need_tls() {
        assert!(!needed("127.0.0.1".parse().unwrap()));
        assert!(!needed("::1".parse().unwrap()));
        assert!(needed("10.0.0.5".parse().unwrap()));
    }

    #[test]
    fn the_ca_is_made_once_and_signs_a_certificate_per_branch() {
        let dir = tempfile::tempdir().unwrap();
        let layout = Layout::new(dir.path());
        let ca = ensure_ca(&layout).unwrap();
        let first = fs::read_to_string(&ca).unwrap();
        assert!(first.starts_with("-----BEGIN CERTIFICATE-----"));
        ensure_ca(&layout).unwrap();
        assert_eq!(fs::read_to_string(&ca).unwrap(), first, "made once");
        let n: BranchName = "a".parse().unwrap();
        crate::store::secrets::ensure_password(&layout, &n, None).unwrap();
        let f = branch_files(
            &layout,
            &n,
            "10.1.2.3".parse().unwrap(),
            "db-7.ci.example",
            None,
        )
        .unwrap();
        assert!(fs::read_to_string(&f.cert)
            .unwrap()
            .starts_with("-----BEGIN CERTIFICATE-----"));
        assert!(fs::read_to_string(&f.key).unwrap().contains("PRIVATE KEY"));
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &PathBuf| fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&layout.tls_ca_key()), 0o600);
        assert_eq!(mode(&f.key), 0o640);
        // openssl, where present, accepts the chain for that address.
        if std::process::Command::new("openssl")
            .arg("version")
            .output()
            .is_ok()
        {
            let out = std::process::Command::new("openssl")
                .args(["verify", "-CAfile"])
                .arg(&f.ca)
                .args(["-verify_ip", "10.1.2.3"])
                .arg(&f.cert)
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            // And for the advertised name other machines use.
            let out = std::process::Command::new("openssl")
                .args(["verify", "-CAfile"])
                .arg(&f.ca)
                .args(["-verify_hostname", "db-7.ci.example"])
                .arg(&f.cert)
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
}
