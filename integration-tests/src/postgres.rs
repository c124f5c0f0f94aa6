//! Postgres for the end-to-end tests: a fresh database per test on the shared server
//! (`DOVETAIL_TEST_POSTGRES`, default `postgres://postgres@127.0.0.1:5432/postgres`), dropped
//! afterwards; or a private server (`initdb` + `pg_ctl` on a free loopback port, run as the
//! `postgres` user when the tests run as root) that a test may stop and start again without
//! disturbing anyone else.

use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::{Context, bail};
use sqlx::Connection;

/// Environment variable naming the admin URL of the shared test server.
pub const TEST_POSTGRES_ENV: &str = "DOVETAIL_TEST_POSTGRES";

/// Admin URL of the shared test server.
pub fn admin_url() -> String {
    std::env::var(TEST_POSTGRES_ENV)
        .ok()
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| "postgres://postgres@127.0.0.1:5432/postgres".to_string())
}

static NEXT: AtomicU64 = AtomicU64::new(0);

/// A fresh, empty database.
#[derive(Debug)]
pub struct TestDb {
    /// Its URL.
    pub url: String,
    name: String,
    admin: String,
}

// === impl TestDb ===

impl TestDb {
    /// Creates `dovetail_e2e_<pid>_<n>` on the server at `admin` (a URL of an existing database).
    ///
    /// # Errors
    /// When the server cannot be reached (the message names the URL).
    pub async fn create(admin: &str) -> anyhow::Result<Self> {
        let name = format!(
            "dovetail_e2e_{}_{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let mut c = sqlx::PgConnection::connect(admin).await.with_context(|| {
            format!("connecting to Postgres at {admin} (set {TEST_POSTGRES_ENV})")
        })?;
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
            "DROP DATABASE IF EXISTS {name} WITH (FORCE)"
        )))
        .execute(&mut c)
        .await?;
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
            .execute(&mut c)
            .await?;
        let base = admin.rsplit_once('/').map_or(admin, |(b, _)| b);
        Ok(Self {
            url: format!("{base}/{name}"),
            name,
            admin: admin.to_string(),
        })
    }

    /// Drops the database (sessions still open on it are closed by the server).
    ///
    /// # Errors
    /// When the server cannot be reached.
    pub async fn drop_database(&self) -> anyhow::Result<()> {
        let mut c = sqlx::PgConnection::connect(&self.admin).await?;
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
            "DROP DATABASE IF EXISTS {} WITH (FORCE)",
            self.name
        )))
        .execute(&mut c)
        .await?;
        Ok(())
    }
}

/// A private Postgres server on a free loopback port; stopped and deleted on drop.
#[derive(Debug)]
pub struct PrivatePostgres {
    bin: PathBuf,
    dir: PathBuf,
    port: u16,
    as_postgres: bool,
}

// === impl PrivatePostgres ===

impl PrivatePostgres {
    fn bin_dir() -> anyhow::Result<PathBuf> {
        let mut versions: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
            .context("PostgreSQL server binaries under /usr/lib/postgresql")?
            .filter_map(|e| e.ok().map(|e| e.path().join("bin")))
            .filter(|p| p.join("pg_ctl").exists())
            .collect();
        versions.sort();
        versions
            .pop()
            .context("no PostgreSQL version with pg_ctl under /usr/lib/postgresql")
    }

    fn run(&self, tool: &str, args: &[&str]) -> anyhow::Result<()> {
        let exe = self.bin.join(tool);
        let status = if self.as_postgres {
            Command::new("runuser")
                .args(["-u", "postgres", "--"])
                .arg(&exe)
                .args(args)
                .status()
        } else {
            Command::new(&exe).args(args).status()
        }
        .with_context(|| format!("running {}", exe.display()))?;
        if !status.success() {
            bail!("{tool} {args:?} failed: {status}");
        }
        Ok(())
    }

    /// `initdb` in a fresh directory, then starts the server.
    ///
    /// # Errors
    /// When the tools are missing or fail.
    pub fn start() -> anyhow::Result<Self> {
        let port = crate::process::free_port()?;
        let dir =
            std::env::temp_dir().join(format!("dovetail-e2e-pg-{}-{port}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)?;
        let as_postgres = Command::new("id")
            .arg("-u")
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
            .unwrap_or(false);
        if as_postgres {
            let ok = Command::new("chown")
                .args(["-R", "postgres:"])
                .arg(&dir)
                .status()?;
            if !ok.success() {
                bail!("chown {} failed", dir.display());
            }
        }
        let pg = Self {
            bin: Self::bin_dir()?,
            dir,
            port,
            as_postgres,
        };
        let data = pg.data();
        pg.run(
            "initdb",
            &[
                "-D",
                &data,
                "-A",
                "trust",
                "-U",
                "postgres",
                "--no-sync",
                "-E",
                "UTF8",
            ],
        )?;
        pg.up()?;
        Ok(pg)
    }

    fn data(&self) -> String {
        self.dir.join("data").display().to_string()
    }

    /// Starts the server (again).
    ///
    /// # Errors
    /// When `pg_ctl start` fails.
    pub fn up(&self) -> anyhow::Result<()> {
        let opts = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=off",
            self.port,
            self.dir.display()
        );
        let log = self.dir.join("log").display().to_string();
        self.run(
            "pg_ctl",
            &["-D", &self.data(), "-o", &opts, "-l", &log, "-w", "start"],
        )
    }

    /// Stops the server (fast shutdown: sessions are cut).
    ///
    /// # Errors
    /// When `pg_ctl stop` fails.
    pub fn down(&self) -> anyhow::Result<()> {
        self.run("pg_ctl", &["-D", &self.data(), "-m", "fast", "-w", "stop"])
    }

    /// The URL of its `postgres` database.
    pub fn admin_url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }
}

impl Drop for PrivatePostgres {
    fn drop(&mut self) {
        let pg_ctl = self.bin.join("pg_ctl");
        let data = self.data();
        let args = ["-D", data.as_str(), "-m", "immediate", "stop"];
        let _ = if self.as_postgres {
            Command::new("runuser")
                .args(["-u", "postgres", "--"])
                .arg(&pg_ctl)
                .args(args)
                .status()
        } else {
            Command::new(&pg_ctl).args(args).status()
        };
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
