//! Postgres for tests: a fresh database per test on the shared server
//! ([`ADMIN_ENV`], default `postgres://postgres@127.0.0.1:5432/postgres`), dropped afterwards;
//! or a private server ([`PrivateServer`]: `initdb` + `pg_ctl` on a free loopback port, run as
//! the `postgres` user when the tests run as root) that a test may stop and start again without
//! disturbing anyone else.

use std::io;
use std::path::PathBuf;
use std::process::Command;

use sqlx::Connection;

/// Environment variable naming the admin URL of the shared test server.
pub const ADMIN_ENV: &str = "DOVETAIL_TEST_POSTGRES";

/// Admin URL of the shared test server ([`ADMIN_ENV`], when set and not empty).
#[must_use]
pub fn admin_url() -> String {
    std::env::var(ADMIN_ENV)
        .ok()
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| "postgres://postgres@127.0.0.1:5432/postgres".to_string())
}

/// A fresh, empty database; [`Database::drop_database`] drops it.
#[derive(Debug)]
pub struct Database {
    /// Its URL.
    pub url: String,
    /// Its name.
    pub name: String,
    admin: String,
}

// === impl Database ===

impl Database {
    /// Creates [`crate::unique`]`(prefix)` on the server at `admin` (a URL of an existing database).
    ///
    /// # Errors
    /// When the server cannot be reached or refuses.
    pub async fn create(admin: &str, prefix: &str) -> Result<Self, sqlx::Error> {
        let name = crate::unique(prefix);
        let mut c = sqlx::PgConnection::connect(admin).await?;
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
    pub async fn drop_database(&self) -> Result<(), sqlx::Error> {
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
pub struct PrivateServer {
    bin: PathBuf,
    dir: PathBuf,
    port: u16,
    as_postgres: bool,
}

// === impl PrivateServer ===

impl PrivateServer {
    fn bin_dir() -> io::Result<PathBuf> {
        let mut versions: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
            .map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!("PostgreSQL server binaries under /usr/lib/postgresql: {e}"),
                )
            })?
            .filter_map(|e| e.ok().map(|e| e.path().join("bin")))
            .filter(|p| p.join("pg_ctl").exists())
            .collect();
        versions.sort();
        versions.pop().ok_or_else(|| {
            io::Error::other("no PostgreSQL version with pg_ctl under /usr/lib/postgresql")
        })
    }

    fn command(&self, tool: &str) -> Command {
        let exe = self.bin.join(tool);
        if self.as_postgres {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(exe);
            c
        } else {
            Command::new(exe)
        }
    }

    fn run(&self, tool: &str, args: &[&str]) -> io::Result<()> {
        let status = self
            .command(tool)
            .args(args)
            .status()
            .map_err(|e| io::Error::new(e.kind(), format!("running {tool}: {e}")))?;
        if !status.success() {
            return Err(io::Error::other(format!(
                "{tool} {args:?} failed: {status}"
            )));
        }
        Ok(())
    }

    /// `initdb` in a fresh directory, then starts the server.
    ///
    /// # Errors
    /// When the tools are missing or fail.
    pub fn start() -> io::Result<Self> {
        let port = crate::process::free_port()?;
        let dir =
            std::env::temp_dir().join(format!("dovetail-test-pg-{}-{port}", std::process::id()));
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
                return Err(io::Error::other(format!("chown {} failed", dir.display())));
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
    pub fn up(&self) -> io::Result<()> {
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
    pub fn down(&self) -> io::Result<()> {
        self.run("pg_ctl", &["-D", &self.data(), "-m", "fast", "-w", "stop"])
    }

    /// The URL of its `postgres` database.
    #[must_use]
    pub fn admin_url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }
}

impl Drop for PrivateServer {
    fn drop(&mut self) {
        let data = self.data();
        let _ = self
            .command("pg_ctl")
            .args(["-D", data.as_str(), "-m", "immediate", "stop"])
            .status();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
