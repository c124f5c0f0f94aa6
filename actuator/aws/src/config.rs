//! How the provider reaches AWS (region, endpoint, credentials) and what it needs to know about
//! the cluster its nodes join (name, API endpoint, CA, Kubernetes version).
//!
//! Plain data: the actuator's `config.rs` reads the `DOVETAIL_*` settings and fills it; tests
//! point `endpoint_url` at a local moto_server with static credentials.

use aws_config::BehaviorVersion;
use aws_sdk_ec2::config::{Credentials as StaticCredentials, Region};

/// The SSM parameter prefix of AWS's public parameters (EKS optimized AMIs, Bottlerocket).
pub const DEFAULT_SSM_PARAMETER_PREFIX: &str = "/aws/service";

/// Where and how the provider calls AWS.
#[derive(Clone, Debug)]
pub struct Config {
    /// AWS region, e.g. `us-east-1`.
    pub region: String,
    /// Endpoint override for EC2, SSM and SQS (a local stand-in such as moto_server); `None`
    /// uses the region's public endpoints.
    pub endpoint_url: Option<String>,
    /// Credentials.
    pub credentials: Credentials,
    /// The cluster the nodes join.
    pub cluster: Cluster,
    /// Prefix of the public SSM parameters AMI aliases resolve through
    /// ([`DEFAULT_SSM_PARAMETER_PREFIX`] on AWS; moto reserves `/aws/`, so tests use another).
    pub ssm_parameter_prefix: String,
    /// Prefix of the launch templates this provider creates (`<prefix>/<cluster>/<hash>`).
    pub launch_template_prefix: String,
    /// The cluster runs without a route to AWS services that have no VPC endpoint (Karpenter's
    /// `settings.isolatedVPC`): the Pricing API is not asked, on-demand prices stay built in.
    pub isolated_vpc: bool,
    /// ENIs of each type's default network card left out of its max pods (Karpenter's
    /// `settings.reservedENIs`, VPC CNI custom networking): the kubelet's `--max-pods` of a
    /// launch counts without them, as the planner's allocatable does.
    pub reserved_enis: u32,
}

/// Which credentials to sign requests with.
#[derive(Clone, Debug, Default)]
pub enum Credentials {
    /// The SDK's default chain: environment, web identity (IRSA: `AWS_ROLE_ARN` +
    /// `AWS_WEB_IDENTITY_TOKEN_FILE`), ECS/EKS pod identity, shared profile files, IMDS.
    #[default]
    DefaultChain,
    /// Fixed keys (tests against a stand-in).
    Static {
        /// Access key ID.
        access_key_id: String,
        /// Secret access key.
        secret_access_key: String,
        /// Session token, for temporary credentials.
        session_token: Option<String>,
    },
}

/// The cluster the nodes join: what the bootstrap user data needs.
#[derive(Clone, Debug, Default)]
pub struct Cluster {
    /// Cluster name (`kubernetes.io/cluster/<name>`, `eks:eks-cluster-name`, bootstrap).
    pub name: String,
    /// API server endpoint, `https://…`.
    pub endpoint: String,
    /// Base64 of the cluster CA bundle (PEM), as EKS's DescribeCluster returns it.
    pub ca_bundle: Option<String>,
    /// Service CIDR (nodeadm's `spec.cluster.cidr`), e.g. `10.100.0.0/16`.
    pub service_cidr: Option<String>,
    /// Kubernetes minor version, e.g. `1.33`: picks the EKS optimized AMI parameters.
    pub kubernetes_version: String,
}

// === impl Config ===

impl Config {
    /// A configuration for `region` and `cluster` with the default credential chain, AWS's
    /// endpoints and parameter prefix.
    pub fn new(region: impl Into<String>, cluster: Cluster) -> Self {
        Self {
            region: region.into(),
            endpoint_url: None,
            credentials: Credentials::DefaultChain,
            cluster,
            ssm_parameter_prefix: DEFAULT_SSM_PARAMETER_PREFIX.to_string(),
            launch_template_prefix: "dovetail".to_string(),
            isolated_vpc: false,
            reserved_enis: 0,
        }
    }

    /// Sets an endpoint override.
    pub fn with_endpoint_url(mut self, url: impl Into<String>) -> Self {
        self.endpoint_url = Some(url.into());
        self
    }

    /// Sets fixed credentials.
    pub fn with_static_credentials(
        mut self,
        access_key_id: impl Into<String>,
        secret_access_key: impl Into<String>,
    ) -> Self {
        self.credentials = Credentials::Static {
            access_key_id: access_key_id.into(),
            secret_access_key: secret_access_key.into(),
            session_token: None,
        };
        self
    }

    /// Marks the VPC isolated (no Pricing API).
    pub fn with_isolated_vpc(mut self, isolated: bool) -> Self {
        self.isolated_vpc = isolated;
        self
    }

    /// Sets Karpenter's `reservedENIs`.
    pub fn with_reserved_enis(mut self, reserved: u32) -> Self {
        self.reserved_enis = reserved;
        self
    }

    /// Sets the SSM parameter prefix AMI aliases resolve under.
    pub fn with_ssm_parameter_prefix(mut self, prefix: impl Into<String>) -> Self {
        self.ssm_parameter_prefix = prefix.into();
        self
    }

    /// Loads the shared SDK configuration (this resolves nothing over the network: the default
    /// chain fetches credentials lazily, on the first call).
    pub async fn sdk_config(&self) -> aws_config::SdkConfig {
        let mut loader = aws_config::defaults(BehaviorVersion::latest())
            .region(Region::new(self.region.clone()));
        if let Some(url) = &self.endpoint_url {
            loader = loader.endpoint_url(url);
        }
        if let Credentials::Static {
            access_key_id,
            secret_access_key,
            session_token,
        } = &self.credentials
        {
            loader = loader.credentials_provider(StaticCredentials::new(
                access_key_id,
                secret_access_key,
                session_token.clone(),
                None,
                "dovetail-static",
            ));
        }
        loader.load().await
    }
}
