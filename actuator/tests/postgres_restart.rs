//! Postgres restarted under a running actuator: submissions during the outage fail with
//! UNAVAILABLE (nothing half-recorded), the worker waits, and after the restart everything
//! resumes and nothing is lost or launched twice.
//!
//! The test runs its own Postgres (`initdb` + `pg_ctl` from /usr/lib/postgresql/*/bin, as the
//! `postgres` user when run as root) on a free loopback port, so that other tests using the
//! shared server on 127.0.0.1:5432 are never disturbed.

mod process_support;
mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use actuator::ledger::ClaimState;
use process_support::{Process, cloud_file, instances, request, statuses, wait_all};
use support::TestDb;

/// A private Postgres server.
struct PrivatePostgres {
    bin: PathBuf,
    dir: PathBuf,
    port: u16,
    as_postgres: bool,
}

impl PrivatePostgres {
    fn bin_dir() -> PathBuf {
        let mut versions: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
            .expect("PostgreSQL server binaries under /usr/lib/postgresql")
            .filter_map(|e| e.ok().map(|e| e.path().join("bin")))
            .filter(|p| p.join("pg_ctl").exists())
            .collect();
        versions.sort();
        versions.pop().expect("a PostgreSQL version with pg_ctl")
    }

    fn run(&self, tool: &str, args: &[&str]) {
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
        .unwrap_or_else(|e| panic!("{tool}: {e}"));
        assert!(status.success(), "{tool} {args:?} failed: {status}");
    }

    fn start() -> Self {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("free port")
            .port();
        let dir = std::env::temp_dir().join(format!("dovetail-pg-{}-{port}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("dir");
        let as_postgres = Command::new("id")
            .arg("-u")
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
            .unwrap_or(false);
        if as_postgres {
            let ok = Command::new("chown")
                .args(["-R", "postgres:"])
                .arg(&dir)
                .status()
                .expect("chown");
            assert!(ok.success());
        }
        let pg = Self {
            bin: Self::bin_dir(),
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
        );
        pg.up();
        pg
    }

    fn data(&self) -> String {
        self.dir.join("data").display().to_string()
    }

    fn up(&self) {
        let opts = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1 -c fsync=off",
            self.port,
            self.dir.display()
        );
        let log = self.dir.join("log").display().to_string();
        self.run(
            "pg_ctl",
            &["-D", &self.data(), "-o", &opts, "-l", &log, "-w", "start"],
        );
    }

    fn down(&self) {
        self.run("pg_ctl", &["-D", &self.data(), "-m", "fast", "-w", "stop"]);
    }

    fn admin_url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }
}

impl Drop for PrivatePostgres {
    fn drop(&mut self) {
        let _ = Command::new(if self.as_postgres { "runuser" } else { "true" })
            .args(if self.as_postgres {
                vec!["-u", "postgres", "--"]
            } else {
                vec![]
            })
            .arg(self.bin.join("pg_ctl"))
            .args(["-D", &self.data(), "-m", "immediate", "stop"])
            .status();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn remove(p: &Path) {
    let _ = std::fs::remove_dir_all(p.parent().expect("dir"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_restart_mid_run_loses_nothing() {
    let pg = PrivatePostgres::start();
    let db = TestDb::postgres_at(&pg.admin_url()).await;
    let cloud = cloud_file(&db, "pg-restart");
    let p = Process::start(db.url(), &cloud, None).await;
    let mut c = p.client().await;

    let first = ["one-1", "one-2", "one-3"];
    let r = c
        .submit(request("plan-1", &[], &first))
        .await
        .expect("submit")
        .into_inner();
    assert_eq!(statuses(&r), ["Accepted"; 3]);
    {
        let ledger = db.ledger().await;
        wait_all(&*ledger, 3, ClaimState::Launched).await;
        ledger.close().await;
    }

    pg.down();
    // While the ledger is down nothing is recorded, and the caller is told to retry.
    let second = ["two-1", "two-2"];
    let e = c
        .submit(request("plan-2", &first, &second))
        .await
        .expect_err("ledger down");
    assert_eq!(e.code(), tonic::Code::Unavailable, "{e:?}");
    pg.up();

    // The same plan, retried, is recorded once the database is back.
    let mut accepted = None;
    for _ in 0..100 {
        match c.submit(request("plan-2", &first, &second)).await {
            Ok(r) => {
                accepted = Some(r.into_inner());
                break;
            }
            Err(e) => {
                assert_eq!(e.code(), tonic::Code::Unavailable, "{e:?}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
    let r = accepted.expect("accepted after the restart");
    assert_eq!(statuses(&r), ["Accepted"; 2]);
    let ledger = db.ledger().await;
    wait_all(&*ledger, 5, ClaimState::Launched).await;
    let (per_claim, total) = instances(&cloud);
    assert_eq!(total, 5, "{per_claim:?}");
    assert!(per_claim.values().all(|n| *n == 1), "{per_claim:?}");
    for name in first {
        assert_eq!(
            ledger.events(name).await.expect("events").len(),
            3,
            "{name}"
        );
    }
    assert_eq!(p.sigterm().await.code(), Some(0));
    ledger.close().await;
    remove(&cloud);
    db.drop().await;
}
