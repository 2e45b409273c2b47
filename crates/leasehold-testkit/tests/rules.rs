//! The SQL and Lua forms of the protocol's rules, pinned to the library's pure functions
//! (`leasehold::rules`, which the protocol model checks) by one table of cases each, run
//! against real servers: the fence tables' claim and check on SQLite, PostgreSQL and MySQL and
//! the Redis fenced scripts against `may_claim` / `may_apply`; the grant statements of the
//! SQLite store, the PostgreSQL and MySQL lease tables (readers' grants too) and session
//! fences and the Redis grant script against `next_fence`, with the server's clock replaced
//! by chosen values.

use leasehold::fence::{Fencing, mysql as my_fence, postgres as pg_fence, sqlite as sq_fence};
use leasehold::{Error, FenceToken, Key, Locker, OwnerToken, rules};
use leasehold_testkit::stores::redis::server::RedisServer;
use leasehold_testkit::{MyDatabase, PgSchema, postgres_base};
use my_fence::mysql_async::{self, prelude::Queryable};
use pg_fence::tokio_postgres;

/// A claim as the table states it: lock key, fence, owner (0: a, 1: b).
type Claim = (&'static str, u64, usize);

/// Installed claims × presented claims, around the edges the forms could get wrong: fence 0,
/// one less, equal (same and other owner), one more, another key, a change in the number of
/// digits (the Lua scripts compare decimal strings) and 2^53.
fn claim_cases() -> Vec<(Option<Claim>, Claim)> {
    let big = 1u64 << 53;
    let installed = [None, Some(("k", 5, 0)), Some(("k", 10, 0)), Some(("k", big + 1, 0))];
    let fences = [0, 1, 4, 5, 6, 9, 10, 11, 99, 100, big, big + 1, big + 2];
    let mut cases = Vec::new();
    for i in installed {
        for key in ["k", "other"] {
            for f in fences {
                for o in [0, 1] {
                    cases.push((i, (key, f, o)));
                }
            }
        }
    }
    cases
}

struct Owners([OwnerToken; 2], [String; 2]);

impl Owners {
    fn new() -> Owners {
        let o = [OwnerToken::generate().unwrap(), OwnerToken::generate().unwrap()];
        let s = [o[0].to_string(), o[1].to_string()];
        Owners(o, s)
    }
    fn fencing(&self, c: Claim) -> Fencing {
        Fencing::new(Key::new(c.0).unwrap(), FenceToken::new(c.1), self.0[c.2])
    }
    /// What the library's rules say: (claim admitted, effect applies).
    fn expected(&self, i: Option<Claim>, p: Claim) -> (bool, bool) {
        let i = i.map(|(k, f, o)| (k, f, self.1[o].as_str()));
        let p = (p.0, p.1, self.1[p.2].as_str());
        (rules::may_claim(i, p), rules::may_apply(i, p))
    }
}

fn verdict(r: leasehold::Result<()>, what: &str) -> bool {
    match r {
        Ok(()) => true,
        Err(Error::StaleFence { .. }) => false,
        Err(e) => panic!("{what}: {e}"),
    }
}

/// Runs every case through `claim` and `check` on fresh resources and compares with the rules.
macro_rules! pin_claims {
    ($name:expr, |$res:ident, $f:ident| claim: $claim:expr, check: $check:expr) => {{
        let owners = Owners::new();
        for (n, (installed, presented)) in claim_cases().into_iter().enumerate() {
            let (want_claim, want_apply) = owners.expected(installed, presented);
            for (step, want) in [("claim", want_claim), ("check", want_apply)] {
                let $res = format!("r{n}-{step}");
                if let Some(i) = installed {
                    let $f = owners.fencing(i);
                    assert!(verdict($claim, "install"), "{}: cannot install {i:?}", $name);
                }
                let $f = owners.fencing(presented);
                let got =
                    if step == "claim" { verdict($claim, step) } else { verdict($check, step) };
                assert_eq!(got, want, "{}: {step} {presented:?} over {installed:?}", $name);
            }
        }
    }};
}

#[test]
fn sqlite_fence_table_follows_the_claim_rules() {
    let db = sq_fence::rusqlite::Connection::open_in_memory().unwrap();
    sq_fence::install(&db).unwrap();
    pin_claims!("sqlite", |res, f| claim: sq_fence::claim(&db, &res, &f), check: sq_fence::check(&db, &res, &f));
}

async fn pg_client(schema: &PgSchema) -> tokio_postgres::Client {
    let url = format!("{}?options=-csearch_path%3D{}", postgres_base(), schema.name);
    let (c, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await.unwrap();
    tokio::spawn(conn);
    c.batch_execute(&format!("CREATE SCHEMA IF NOT EXISTS {}", schema.name)).await.unwrap();
    c
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_fence_table_follows_the_claim_rules() {
    let schema = PgSchema::new();
    let c = pg_client(&schema).await;
    pg_fence::install(&c).await.unwrap();
    pin_claims!("postgres", |res, f| claim: pg_fence::claim(&c, &res, &f).await, check: pg_fence::check(&c, &res, &f).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_fence_table_follows_the_claim_rules() {
    let db = MyDatabase::new();
    let mut c = mysql_async::Conn::from_url(db.url("")).await.unwrap();
    my_fence::install(&mut c).await.unwrap();
    pin_claims!("mysql", |res, f| claim: my_fence::claim(&mut c, &res, &f).await, check: my_fence::check(&mut c, &res, &f).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_fenced_scripts_follow_the_claim_rules() {
    let server = RedisServer::start();
    let mut r = leasehold::fence::redis::RedisFence::connect(&server.url()).await.unwrap();
    pin_claims!("redis", |res, f| claim: r.claim(&res, &f).await, check: r.set(&res, &f, &format!("{{{res}}}:v"), "x").await);
}

/// A store clock with a fractional second, in µs since 1970.
const CLOCK: u64 = 1_700_000_000_123_456;

/// The key's counter before a grant (`None`: no row yet) around the clock.
fn fence_cases() -> Vec<Option<u64>> {
    vec![
        None,
        Some(1),
        Some(41),
        Some(CLOCK - 2),
        Some(CLOCK - 1),
        Some(CLOCK),
        Some(CLOCK + 1),
        Some(CLOCK + 1_000_000),
    ]
}

fn expected_fence(counter: Option<u64>) -> u64 {
    rules::next_fence(counter.unwrap_or(0), CLOCK)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_grant_issues_the_fence_rule() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("locks.db");
    // The store creates its schema; the statement then runs on that very table.
    drop(Locker::connect(&format!("sqlite://{}", path.display())).await.unwrap());
    let db = sq_fence::rusqlite::Connection::open(&path).unwrap();
    for (n, counter) in fence_cases().into_iter().enumerate() {
        let key = format!("k{n}");
        if let Some(c) = counter {
            db.execute(
                "INSERT INTO leasehold_fences (key, fence) VALUES (?1, ?2)",
                (&key, c as i64),
            )
            .unwrap();
        }
        let got: i64 = db
            .query_row(leasehold::backends::sqlite::tools::GRANT_FENCE, (&key, CLOCK as i64), |r| {
                r.get(0)
            })
            .unwrap();
        assert_eq!(got as u64, expected_fence(counter), "counter {counter:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_grants_issue_the_fence_rule() {
    use leasehold::backends::postgres::tools;
    let schema = PgSchema::new();
    let base = format!("{}?schema={}", postgres_base(), schema.name);
    drop(Locker::connect(&base).await.unwrap());
    drop(Locker::connect(&format!("{base}&mode=session")).await.unwrap());
    let c = pg_client(&schema).await;
    let clock = format!("{CLOCK}::bigint");
    let url = |s: &str| s.parse::<leasehold::StoreUrl>().unwrap();
    let lease = tools::lease_statements(&url(&base)).unwrap();
    let t = format!("\"{}\".\"leasehold_leases\"", schema.name);
    let prims = tools::primitive_statements(&url(&base)).unwrap();
    for (form, original) in [
        ("grant", &lease.grant),
        ("grant_queued", &lease.grant_queued),
        ("grant_shared", &prims.grant_shared),
    ] {
        let sql = original.replace(tools::CLOCK_US, &clock);
        assert_ne!(&sql, original, "{form} reads the clock");
        for (n, counter) in fence_cases().into_iter().enumerate() {
            let key = format!("{form}{n}");
            if let Some(f) = counter {
                let seed = format!(
                    "INSERT INTO {t} (key, owner, fence, expires_at) VALUES ($1, NULL, $2, now())"
                );
                c.execute(&seed, &[&key, &(f as i64)]).await.unwrap();
            }
            let owner = OwnerToken::generate().unwrap().to_string();
            let row = if form != "grant_queued" {
                c.query_one(&sql, &[&key, &owner, &30_000i64, &None::<String>]).await.unwrap()
            } else {
                c.query_one(
                    &sql,
                    &[&key, &owner, &30_000i64, &None::<String>, &0i64, &"leasehold-test"],
                )
                .await
                .unwrap()
            };
            let got: Option<i64> = row.get(0);
            assert_eq!(
                got.map(|f| f as u64),
                Some(expected_fence(counter)),
                "{form}, counter {counter:?}"
            );
        }
    }
    // Session locks: once per connection the sequence is moved up to the clock (when more
    // than the slack behind; the slack keeps a clock-back from racing grants on other
    // connections), then every grant takes `nextval`. So a connection's first fence is
    // above max(counter + 1, clock) outside the slack window, and above the counter inside
    // it (a failover, hence a new connection, takes far longer than the slack).
    let session = tools::session_statements(&url(&format!("{base}&mode=session"))).unwrap();
    let seq = format!("\"{}\".leasehold_fence_seq", schema.name);
    let clock_back = session.clock_back.replace(tools::CLOCK_US, &clock);
    assert_ne!(clock_back, session.clock_back, "the clock-back reads the clock");
    for counter in fence_cases().into_iter().flatten() {
        c.execute(&format!("SELECT setval('{seq}', $1)"), &[&(counter as i64)]).await.unwrap();
        c.batch_execute(&clock_back).await.unwrap();
        let got: i64 = c.query_one(&session.try_grant, &[&"pin"]).await.unwrap().get(0);
        c.execute("SELECT pg_advisory_unlock_all()", &[]).await.unwrap();
        let taken = counter + 1;
        let moved = if CLOCK > taken + tools::CLOCK_BACK_SLACK_US as u64 { CLOCK } else { taken };
        assert_eq!(got as u64, moved + 1, "session, counter {counter}");
        let mutex_rule = expected_fence(Some(counter));
        let in_slack = CLOCK > taken && CLOCK <= taken + tools::CLOCK_BACK_SLACK_US as u64;
        assert!(got as u64 > mutex_rule || in_slack, "session, counter {counter}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_grants_issue_the_fence_rule() {
    use leasehold::backends::mysql::tools;
    let db = MyDatabase::new();
    drop(Locker::connect(&db.url("")).await.unwrap());
    drop(Locker::connect(&db.url("?mode=session")).await.unwrap());
    let mut c = mysql_async::Conn::from_url(db.url("")).await.unwrap();
    let clock = format!("CAST({CLOCK} AS UNSIGNED)");
    let url = |s: String| s.parse::<leasehold::StoreUrl>().unwrap();
    let lease =
        tools::lease_statements(&url(db.url(""))).unwrap().grant.replace(tools::CLOCK_US, &clock);
    let session = tools::session_statements(&url(db.url("?mode=session"))).unwrap().fence.unwrap();
    let session = session.replace(tools::CLOCK_US, &clock);
    for (form, sql, table) in
        [("lease", &lease, "leasehold_leases"), ("session", &session, "leasehold_leases_fences")]
    {
        for (n, counter) in fence_cases().into_iter().enumerate() {
            let key = format!("{form}{n}");
            if let Some(f) = counter {
                let seed = if form == "lease" {
                    format!(
                        "INSERT INTO {table} (lock_key, owner, fence, expires_at) VALUES (?, NULL, ?, UTC_TIMESTAMP(6))"
                    )
                } else {
                    format!("INSERT INTO {table} (lock_key, fence) VALUES (?, ?)")
                };
                c.exec_drop(seed, (key.as_bytes(), f)).await.unwrap();
            }
            if form == "lease" {
                let owner = OwnerToken::generate().unwrap().to_string();
                c.exec_drop(sql.as_str(), (key.as_bytes(), owner, 30_000_000u64, None::<String>))
                    .await
                    .unwrap();
            } else {
                c.exec_drop(sql.as_str(), (key.as_bytes(),)).await.unwrap();
            }
            assert_eq!(
                c.last_insert_id(),
                Some(expected_fence(counter)),
                "{form}, counter {counter:?}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_grant_script_issues_the_fence_rule() {
    use leasehold::fence::redis::redis;
    let server = RedisServer::start();
    let (grant, _) = leasehold::backends::redis::tools::scripts();
    let time = "local t = redis.call('TIME')";
    assert!(grant.contains(time), "the grant script reads the clock with TIME");
    let script = redis::Script::new(&grant.replace(time, "local t = {ARGV[5], ARGV[6]}"));
    let client = redis::Client::open(server.url()).unwrap();
    let mut conn = client.get_connection_manager().await.unwrap();
    for (n, counter) in fence_cases().into_iter().enumerate() {
        let counter_key = format!("k{n}:fence");
        if let Some(f) = counter {
            let _: () =
                redis::cmd("SET").arg(&counter_key).arg(f).query_async(&mut conn).await.unwrap();
        }
        let (ok, fence): (i64, u64) = script
            .key(format!("k{n}"))
            .key(&counter_key)
            .key(format!("k{n}:holder"))
            .arg("owner")
            .arg(30_000)
            .arg("")
            .arg(60_000)
            .arg(CLOCK / 1_000_000)
            .arg(CLOCK % 1_000_000)
            .invoke_async(&mut conn)
            .await
            .unwrap();
        assert_eq!((ok, fence), (1, expected_fence(counter)), "counter {counter:?}");
        // The counter outlives the grant by the horizon (60 s here), no longer.
        let pttl: i64 = redis::cmd("PTTL").arg(&counter_key).query_async(&mut conn).await.unwrap();
        assert!((60_000..=90_000).contains(&pttl), "counter {counter:?}: pttl {pttl}");
    }
}

/// A reader's grant on Redis issues its fence from the key's counter by the same rule.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_shared_grant_script_issues_the_fence_rule() {
    use leasehold::fence::redis::redis;
    let server = RedisServer::start();
    let grant = leasehold::backends::redis::tools::shared_grant_script();
    let time = "local t = redis.call('TIME')";
    assert!(grant.contains(time), "the reader's grant reads the clock with TIME");
    let script = redis::Script::new(&grant.replace(time, "local t = {ARGV[5], ARGV[6]}"));
    let client = redis::Client::open(server.url()).unwrap();
    let mut conn = client.get_connection_manager().await.unwrap();
    for (n, counter) in fence_cases().into_iter().enumerate() {
        let counter_key = format!("r{n}:fence");
        if let Some(f) = counter {
            let _: () =
                redis::cmd("SET").arg(&counter_key).arg(f).query_async(&mut conn).await.unwrap();
        }
        let (ok, fence): (i64, u64) = script
            .key(format!("r{n}"))
            .key(&counter_key)
            .key(format!("r{n}:readers"))
            .key(format!("r{n}:intents"))
            .arg("owner")
            .arg(30_000)
            .arg("")
            .arg(60_000)
            .arg(CLOCK / 1_000_000)
            .arg(CLOCK % 1_000_000)
            .invoke_async(&mut conn)
            .await
            .unwrap();
        assert_eq!((ok, fence), (1, expected_fence(counter)), "counter {counter:?}");
        // The counter outlives the grant by the horizon (60 s here), no longer.
        let pttl: i64 = redis::cmd("PTTL").arg(&counter_key).query_async(&mut conn).await.unwrap();
        assert!((60_000..=90_000).contains(&pttl), "counter {counter:?}: pttl {pttl}");
    }
}
