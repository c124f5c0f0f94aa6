//! The Kubernetes client of the watcher and the actuator, and the one meaning of
//! `--kubeconfig` / `DOVETAIL_KUBECONFIG` ([`ENV_KUBECONFIG`]):
//!
//! - a path: that kubeconfig file (its current context);
//! - `in-cluster`: the service account of the pod the service runs in;
//! - `none`: no cluster (the actuator then runs without the NodeClaim lifecycle; the watcher
//!   refuses it, since it has nothing to watch);
//! - unset: inferred as kube and kubectl do: `$KUBECONFIG`, then `~/.kube/config`, then
//!   in-cluster. When none of them exists the setting is refused at start-up (exit 64) with a
//!   message saying so, rather than the service failing later.

use std::path::{Path, PathBuf};

use kube::config::{InClusterError, InferConfigError, KubeconfigError};

use crate::config::{self, Input, Settings};

/// `DOVETAIL_KUBECONFIG`: the cluster (a kubeconfig path, `in-cluster` or `none`; unset: infer).
pub const ENV_KUBECONFIG: &str = "DOVETAIL_KUBECONFIG";

/// Where a service's Kubernetes API is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KubeSource {
    /// `$KUBECONFIG`, `~/.kube/config`, then in-cluster, as kube infers it.
    Infer,
    /// The service account of the pod the service runs in.
    InCluster,
    /// A kubeconfig file.
    File(PathBuf),
    /// No cluster.
    None,
}

/// A cluster that was configured but cannot be reached through a client.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The kubeconfig file cannot be read or used.
    #[error("kubeconfig {path}")]
    Kubeconfig {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: KubeconfigError,
    },
    /// `in-cluster` outside a pod, or without its service account.
    #[error("in-cluster configuration")]
    InCluster(#[source] InClusterError),
    /// Nothing to infer a configuration from.
    #[error("inferring a cluster (KUBECONFIG, ~/.kube/config, in-cluster)")]
    Infer(#[source] InferConfigError),
    /// The client cannot be built from the configuration.
    #[error("building the Kubernetes client")]
    Client(#[source] kube::Error),
}

// === impl KubeSource ===

impl KubeSource {
    /// Reads `input` (`--kubeconfig` or [`ENV_KUBECONFIG`]); when it is unset, checks that there
    /// is something to infer a cluster from (`KUBECONFIG`, `$HOME/.kube/config`, or the
    /// `KUBERNETES_SERVICE_HOST` of a pod).
    ///
    /// # Errors
    /// Unset with nothing to infer from: the message names the setting and its choices.
    pub fn load(input: Option<Input>, s: &Settings<'_>) -> config::Result<Self> {
        let Some(input) = input else {
            let home_config = s
                .env("HOME")
                .map(|h| Path::new(&h).join(".kube").join("config"));
            let inferable = s.env("KUBECONFIG").is_some()
                || home_config.is_some_and(|p| p.is_file())
                || s.env("KUBERNETES_SERVICE_HOST").is_some();
            if inferable {
                return Ok(Self::Infer);
            }
            return Err(config::Error::Conflict(format!(
                "--kubeconfig (or {ENV_KUBECONFIG}) is unset and there is no cluster to infer \
                 (no KUBECONFIG, no ~/.kube/config, not in a pod): set it to a kubeconfig PATH, \
                 in-cluster or none"
            )));
        };
        Ok(match input.value.trim() {
            "in-cluster" => Self::InCluster,
            "none" => Self::None,
            path => Self::File(PathBuf::from(path)),
        })
    }

    /// The client configuration; `None` for [`KubeSource::None`].
    ///
    /// # Errors
    /// The kubeconfig cannot be read, or the cluster cannot be found.
    pub async fn config(&self) -> Result<Option<kube::Config>, Error> {
        Ok(Some(match self {
            Self::None => return Ok(None),
            Self::Infer => kube::Config::infer().await.map_err(Error::Infer)?,
            Self::InCluster => kube::Config::incluster().map_err(Error::InCluster)?,
            Self::File(path) => {
                let kc = |source| Error::Kubeconfig {
                    path: path.clone(),
                    source,
                };
                let file = kube::config::Kubeconfig::read_from(path).map_err(kc)?;
                kube::Config::from_custom_kubeconfig(file, &Default::default())
                    .await
                    .map_err(kc)?
            }
        }))
    }

    /// A client; `None` for [`KubeSource::None`].
    ///
    /// # Errors
    /// As [`KubeSource::config`], or the client cannot be built.
    pub async fn client(&self) -> Result<Option<kube::Client>, Error> {
        self.config()
            .await?
            .map(|c| kube::Client::try_from(c).map_err(Error::Client))
            .transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load(value: Option<&str>, env: &[(&str, &str)]) -> config::Result<KubeSource> {
        let env = config::vars(env);
        let input = value.map(|v| Input {
            key: "--kubeconfig".into(),
            value: v.into(),
        });
        KubeSource::load(input, &Settings::new(&env))
    }

    #[test]
    fn one_meaning_of_kubeconfig() {
        assert_eq!(
            load(Some("in-cluster"), &[]).unwrap(),
            KubeSource::InCluster
        );
        assert_eq!(load(Some("none"), &[]).unwrap(), KubeSource::None);
        assert_eq!(
            load(Some("/etc/kube/config"), &[]).unwrap(),
            KubeSource::File("/etc/kube/config".into())
        );
        assert_eq!(
            load(None, &[("KUBECONFIG", "/k")]).unwrap(),
            KubeSource::Infer
        );
        assert_eq!(
            load(None, &[("KUBERNETES_SERVICE_HOST", "10.0.0.1")]).unwrap(),
            KubeSource::Infer
        );
        let e = load(None, &[("HOME", "/nonexistent")]).unwrap_err();
        assert!(
            e.to_string().starts_with(
                "--kubeconfig (or DOVETAIL_KUBECONFIG) is unset and there is no cluster"
            ),
            "{e}"
        );
        assert!(e.to_string().contains("in-cluster or none"), "{e}");
    }
}
