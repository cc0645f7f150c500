//! Keys, certificates, tokens and kubeconfigs of a lab cluster: made here
//! (rcgen), so the lab needs no openssl on the machine.

use std::path::{Path, PathBuf};

use super::LabError;

/// A lab cluster's bearer tokens, new for each start: anyone who can reach
/// its loopback port must still read the user's own files to act on it.
#[derive(Clone, Debug)]
pub struct Tokens {
    /// The admin user's (group `system:masters`).
    pub admin: String,
    /// A user with no RBAC at all (for forbidden-path tests and trainees).
    pub viewer: String,
}

impl Tokens {
    pub fn generate() -> Result<Tokens, LabError> {
        let random = || {
            let mut bytes = [0u8; 24];
            ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut bytes).map_err(|_| {
                LabError::Start { component: "pki".into(), message: "no randomness for the lab's tokens".into() }
            })?;
            Ok::<_, LabError>(bytes.iter().map(|b| format!("{b:02x}")).collect::<String>())
        };
        Ok(Tokens { admin: format!("kgpu-admin-{}", random()?), viewer: format!("kgpu-viewer-{}", random()?) })
    }
}

/// Writes `text` to `path` readable by the user alone: the lab's keys,
/// tokens and kubeconfigs are credentials.
pub(crate) fn write(path: &Path, text: &str) -> Result<(), LabError> {
    use std::io::Write;
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|source| LabError::Io { path: parent.to_path_buf(), source })?;
    }
    let io = |source| LabError::Io { path: path.to_path_buf(), source };
    let mut file =
        std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(path).map_err(io)?;
    // A file an older kgpu wrote 0644 is narrowed too.
    file.set_permissions(std::fs::Permissions::from_mode(0o600)).map_err(io)?;
    file.write_all(text.as_bytes()).map_err(io)
}

/// The API server's service-account signing key (ECDSA P-256, PKCS#8 PEM)
/// at `private`, and its public half (the verification key) at `public`.
pub fn service_account_key(private: &Path, public: &Path) -> Result<(), LabError> {
    let key = rcgen::KeyPair::generate().map_err(|e| LabError::Start {
        component: "pki".into(),
        message: format!("cannot generate the service-account key: {e}"),
    })?;
    write(private, &key.serialize_pem())?;
    write(public, &key.public_key_pem())
}

/// A self-signed serving certificate for `localhost` and 127.0.0.1, as
/// `dir/tls.crt` and `dir/tls.key` (what controller-runtime webhooks read).
pub fn serving_cert(dir: &Path) -> Result<(PathBuf, PathBuf), LabError> {
    let certified =
        rcgen::generate_simple_self_signed(vec!["localhost".to_string(), "127.0.0.1".to_string()]).map_err(|e| {
            LabError::Start { component: "pki".into(), message: format!("cannot generate a serving certificate: {e}") }
        })?;
    let (crt, key) = (dir.join("tls.crt"), dir.join("tls.key"));
    write(&crt, &certified.cert.pem())?;
    write(&key, &certified.signing_key.serialize_pem())?;
    Ok((crt, key))
}

/// etcd's certificates: its own CA, a certificate etcd serves (and uses
/// with its peer port) for 127.0.0.1, and the client certificate the API
/// server presents. etcd asks every client for a certificate of that CA, so
/// another local user cannot read the lab's Secrets off its loopback port.
#[derive(Clone, Debug)]
pub struct EtcdCerts {
    pub ca: PathBuf,
    pub server_cert: PathBuf,
    pub server_key: PathBuf,
    pub client_cert: PathBuf,
    pub client_key: PathBuf,
}

impl EtcdCerts {
    /// Makes them under `dir` (files for the user alone).
    pub fn generate(dir: &Path) -> Result<EtcdCerts, LabError> {
        use rcgen::{
            BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
            KeyUsagePurpose,
        };
        let fail = |e: rcgen::Error| LabError::Start {
            component: "pki".into(),
            message: format!("cannot make etcd's certificates: {e}"),
        };
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).map_err(fail)?;
        ca_params.distinguished_name.push(DnType::CommonName, "kgpu lab etcd CA");
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().map_err(fail)?).map_err(fail)?;
        let leaf = |name: &str, usages: Vec<ExtendedKeyUsagePurpose>| {
            let mut params =
                CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()]).map_err(fail)?;
            params.distinguished_name.push(DnType::CommonName, name);
            params.key_usages = vec![KeyUsagePurpose::DigitalSignature, KeyUsagePurpose::KeyEncipherment];
            params.extended_key_usages = usages;
            let key = KeyPair::generate().map_err(fail)?;
            let cert = params.signed_by(&key, &ca).map_err(fail)?;
            Ok::<_, LabError>((cert.pem(), key.serialize_pem()))
        };
        use ExtendedKeyUsagePurpose::{ClientAuth, ServerAuth};
        let (server_pem, server_key_pem) = leaf("kgpu-lab-etcd", vec![ServerAuth, ClientAuth])?;
        let (client_pem, client_key_pem) = leaf("kube-apiserver-etcd-client", vec![ClientAuth])?;
        let certs = EtcdCerts {
            ca: dir.join("ca.crt"),
            server_cert: dir.join("server.crt"),
            server_key: dir.join("server.key"),
            client_cert: dir.join("client.crt"),
            client_key: dir.join("client.key"),
        };
        write(&certs.ca, &ca.pem())?;
        write(&certs.server_cert, &server_pem)?;
        write(&certs.server_key, &server_key_pem)?;
        write(&certs.client_cert, &client_pem)?;
        write(&certs.client_key, &client_key_pem)?;
        Ok(certs)
    }
}

/// The API server's `--token-auth-file`.
pub fn tokens_csv(tokens: &Tokens) -> String {
    format!("{},admin,admin-uid,system:masters\n{},viewer,viewer-uid,\n", tokens.admin, tokens.viewer)
}

/// A kubeconfig with one cluster, user and context (the API server's
/// certificate is self-signed, so it is not verified: loopback only).
pub fn kubeconfig(server: &str, token: &str, user: &str, context: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: {context}\n  cluster:\n    server: {server}\n    insecure-skip-tls-verify: true\nusers:\n- name: {user}\n  user:\n    token: {token}\ncontexts:\n- name: {context}\n  context:\n    cluster: {context}\n    user: {user}\ncurrent-context: {context}\n"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_certificates_are_pem() {
        let dir = tempfile::tempdir().unwrap();
        service_account_key(&dir.path().join("sa.key"), &dir.path().join("sa.pub")).unwrap();
        let key = std::fs::read_to_string(dir.path().join("sa.key")).unwrap();
        assert!(key.starts_with("-----BEGIN PRIVATE KEY-----"), "{key}");
        let public = std::fs::read_to_string(dir.path().join("sa.pub")).unwrap();
        assert!(public.starts_with("-----BEGIN PUBLIC KEY-----"), "{public}");
        let (crt, key) = serving_cert(&dir.path().join("certs")).unwrap();
        assert!(std::fs::read_to_string(crt).unwrap().starts_with("-----BEGIN CERTIFICATE-----"));
        assert!(std::fs::read_to_string(key).unwrap().contains("PRIVATE KEY"));
    }

    #[test]
    fn a_kubeconfig_names_its_context() {
        let tokens = Tokens::generate().unwrap();
        let text = kubeconfig("https://127.0.0.1:6443", &tokens.admin, "admin", "kgpu-lab");
        let v: serde_yaml::Value = serde_yaml::from_str(&text).unwrap();
        assert_eq!(v["current-context"], "kgpu-lab");
        assert_eq!(v["users"][0]["user"]["token"], tokens.admin.as_str());
        // Each start its own, and written for the user alone.
        assert_ne!(Tokens::generate().unwrap().admin, tokens.admin);
        assert!(tokens.admin.len() > 40);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kubeconfig");
        std::fs::write(&path, "old").unwrap();
        write(&path, &text).unwrap();
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), text);
    }
}
