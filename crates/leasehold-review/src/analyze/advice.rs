//! What each finding says: the timeline of what breaks, the fix in the client's own API, and
//! leasehold's equivalent.

use crate::{Lang, Rule};

/// (message, fix, leasehold) for a finding of `rule` in `lang`; `detail` adds what the site
/// itself shows (the separate EXPIRE, the constant, the pool).
pub(crate) fn advice(rule: Rule, lang: Lang, detail: &str) -> (String, String, String) {
    let msg = match rule {
        Rule::NxWithoutExpiry => format!(
            "the lock key is set with no expiry{detail}: if this process dies or is killed after the SET and before \
             it releases, the key stays forever and every later acquire fails until someone deletes it by hand"
        ),
        Rule::ReleaseWithoutOwnerCheck => format!(
            "the lock is released without checking who holds it{detail}: holder A's key expires while it works (a GC \
             pause, a slow call), B acquires, and A's delete removes B's lock, so C acquires while B still works"
        ),
        Rule::RenewWithoutOwnerCheck => format!(
            "the lock's expiry is extended without checking who holds it{detail}: after A's lease lapsed and B \
             acquired, A's renewal extends B's key (or revives it), so A goes on believing it holds the lock while B works"
        ),
        Rule::ConstantLockValue => format!(
            "the lock value is {detail}, the same for every holder (or every thread and task of one process): an \
             owner check cannot tell A from B, so A's release or renewal after its lease lapsed acts on B's lock"
        ),
        Rule::UncheckedAcquire => format!(
            "the acquire's reply is not read{detail}: when another holder already has the lock the call answers \
             'not acquired' without an error, and this code goes on to do the work anyway, beside the holder"
        ),
        Rule::SessionLockOnPool => format!(
            "a session-level lock is taken through a connection pool{detail}: the lock belongs to whichever pooled \
             connection ran the statement, so the unlock can run on another connection (and fail silently) while the \
             lock stays held by a connection sitting in the pool, or is freed when the pool recycles it"
        ),
        Rule::TimeoutMisread => format!(
            "an error or timeout from the acquire is read as a definite answer{detail}: a timed-out SET may have \
             succeeded on the server, so 'not acquired' leaves a lock held by nobody until it expires, and 'acquired' \
             runs the work beside a real holder"
        ),
        Rule::FailOpen => format!(
            "a store error around the lock is swallowed and the work goes on{detail}: when the store is down or slow, \
             every worker runs the job at once, unlocked, with nothing in the logs but a warning"
        ),
        Rule::UnfencedEffect => format!(
            "the lock guards a write to another resource with no fencing token or idempotency key{detail}: a holder \
             that stalls past its lease resumes and writes after its successor, and the resource cannot tell"
        ),
    };
    (msg, fix(rule, lang), leasehold(rule).to_owned())
}

fn fix(rule: Rule, lang: Lang) -> String {
    let set = match lang {
        Lang::Python => "r.set(key, token, nx=True, px=ttl_ms)",
        Lang::Java => {
            "jedis.set(key, token, SetParams.setParams().nx().px(ttlMs)) (Spring: opsForValue().setIfAbsent(key, token, Duration.ofMillis(ttlMs)))"
        }
        Lang::Go => "rdb.SetNX(ctx, key, token, ttl) with a non-zero ttl",
        Lang::JavaScript | Lang::TypeScript | Lang::Tsx => {
            "client.set(key, token, { NX: true, PX: ttlMs }) (ioredis: redis.set(key, token, 'PX', ttlMs, 'NX'))"
        }
        Lang::Rust => "redis::cmd(\"SET\").arg(key).arg(token).arg(\"NX\").arg(\"PX\").arg(ttl_ms)",
        Lang::Php => "$redis->set($key, $token, ['nx', 'px' => $ttlMs])",
        Lang::Ruby => "redis.set(key, token, nx: true, px: ttl_ms)",
    };
    let token = match lang {
        Lang::Python => "secrets.token_hex(16)",
        Lang::Java => "UUID.randomUUID().toString()",
        Lang::Go => "a random token (crypto/rand, or uuid.NewString())",
        Lang::JavaScript | Lang::TypeScript | Lang::Tsx => "crypto.randomUUID()",
        Lang::Rust => "a random token (uuid::Uuid::new_v4())",
        Lang::Php => "bin2hex(random_bytes(16))",
        Lang::Ruby => "SecureRandom.hex(16)",
    };
    let script = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";
    match rule {
        Rule::NxWithoutExpiry => format!("set the value and the expiry in one command: {set}"),
        Rule::ReleaseWithoutOwnerCheck => format!(
            "release with one script that compares the value first: EVAL \"{script}\" 1 key token (or a lock library that does, e.g. redis-py's Lock, Redisson, redsync)"
        ),
        Rule::RenewWithoutOwnerCheck => "extend with one script that compares the value first: EVAL \"if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) else return 0 end\" 1 key token ttl_ms, and stop the work when it returns 0".to_owned(),
        Rule::ConstantLockValue => format!("give every acquisition its own random value, e.g. {token}, and keep it to release and renew"),
        Rule::UncheckedAcquire => "read the acquire's reply and do the work only when it says acquired (SET NX answers nil/false/null when the key is held; pg_try_advisory_lock and GET_LOCK return a boolean/0)".to_owned(),
        Rule::SessionLockOnPool => "take one connection from the pool and hold it for the lock, the work and the unlock (release it to the pool only after the unlock), or use pg_try_advisory_xact_lock inside one transaction".to_owned(),
        Rule::TimeoutMisread => "treat a timeout as unknown: retry with the same value (SET NX with your own token is idempotent for you), or release owner-checked before giving up; propagate other errors".to_owned(),
        Rule::FailOpen => "let the store error propagate (fail closed), or make failing open an explicit, logged and alerted decision".to_owned(),
        Rule::UnfencedEffect => "pass a fencing token (a number that grows with every grant) with the write and have the resource refuse an older one, or make the write idempotent with a key derived from the work item".to_owned(),
    }
}

fn leasehold(rule: Rule) -> &'static str {
    match rule {
        Rule::NxWithoutExpiry => {
            "leasehold's Locker::acquire always sets a lease with its TTL in the same step, and `leasehold run` renews it while the command runs"
        }
        Rule::ReleaseWithoutOwnerCheck => {
            "leasehold's Lease::release is owner-checked on every store and says whether the lease was still held (MayHaveOverlapped otherwise)"
        }
        Rule::RenewWithoutOwnerCheck => {
            "leasehold's Lease renews owner-checked and fires lost() (and turns admit() false) the moment a renewal fails"
        }
        Rule::ConstantLockValue => {
            "leasehold gives every grant its own owner token and fence; you never choose the value"
        }
        Rule::UncheckedAcquire => {
            "leasehold's try_acquire returns Busy as a value you must match, and acquire waits (notified) within a bound you set"
        }
        Rule::SessionLockOnPool => {
            "leasehold's postgres:// and mysql:// stores hold a session lock on a connection of its own, kept for the lease and checked on renewal"
        }
        Rule::TimeoutMisread => {
            "leasehold reports an unknown outcome as Error::UnknownOutcome and cleans up owner-checked in the background"
        }
        Rule::FailOpen => {
            "`leasehold run` fails closed by default (exit 69 when the store is unavailable); failing open is --if-unavailable run, a choice you write down"
        }
        Rule::UnfencedEffect => {
            "every leasehold grant carries a fence (lease.fence()); leasehold::fence::{postgres, mysql, sqlite, redis, etcd, http} check it with the write, and `leasehold run` exports LEASEHOLD_FENCE"
        }
    }
}
