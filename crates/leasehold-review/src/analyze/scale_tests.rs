//! The lookup work of a review grows in proportion to the file: a file of 2n lock functions
//! costs at most a little over twice one of n (counted by `work`, not timed). The shapes are
//! those of `scripts/review_scale_gen.py`, which times the same thing.

use std::path::Path;

use super::work;
use crate::Lang;

const PY: &[&str] = &[
    "def f_{n}(r):\n    if r.setnx(\"lock:{n}\", \"1\"):\n        r.expire(\"lock:{n}\", 10)\n        r.delete(\"lock:{n}\")\n\n",
    "def g_{n}(r):\n    key = \"lock:job:{n}\"\n    ok = r.set(key, \"1\", nx=True, ex=10)\n    if not ok:\n        return False\n    requests.post(\"http://billing/{n}\")\n    if r.get(key) == \"1\":\n        r.delete(key)\n    return True\n\n",
    "RELEASE_{n} = \"\"\"if redis.call(\"get\", KEYS[1]) == ARGV[1] then return redis.call(\"del\", KEYS[1]) end return 0\"\"\"\n\n\ndef h_{n}(r, token):\n    acquired = r.set(\"lock:h:{n}\", token, nx=True, px=30000)\n    if acquired:\n        r.eval(RELEASE_{n}, 1, \"lock:h:{n}\", token)\n\n",
    "def s_{n}(conn):\n    cur = conn.cursor()\n    cur.execute(\"SELECT pg_try_advisory_lock({n})\")\n    if cur.fetchone()[0]:\n        cur.execute(\"SELECT pg_advisory_unlock({n})\")\n\n",
    "def t_{n}(r):\n    try:\n        got = r.set(\"lock:t:{n}\", \"x\", nx=True, ex=5)\n    except redis.RedisError:\n        return False\n    return got\n\n\ndef u_{n}(r):\n    t_{n}(r)\n\n",
];

const GO: &[&str] = &[
    "func f{n}(ctx context.Context, r *redis.Client) bool {\n\tok, err := r.SetNX(ctx, \"lock:{n}\", \"1\", 0).Result()\n\tif err != nil {\n\t\treturn false\n\t}\n\tif ok {\n\t\tr.Expire(ctx, \"lock:{n}\", 10)\n\t\tr.Del(ctx, \"lock:{n}\")\n\t}\n\treturn ok\n}\n\n",
];

const JAVA: &[&str] = &[
    "    void f{n}(Jedis r) {\n        try {\n            String ok = r.set(\"lock:{n}\", \"1\", SetParams.setParams().nx());\n            if (ok == null) { return; }\n            r.del(\"lock:{n}\");\n        } catch (JedisException e) {\n            return;\n        }\n    }\n\n",
];

const JS: &[&str] = &[
    "async function f{n}(r) {\n  const reply = await r.set('lock:{n}', '1', 'NX');\n  if (reply !== 'OK') return false;\n  await r.pexpire('lock:{n}', 10);\n  await r.del('lock:{n}');\n  return true;\n}\n\n",
];

fn source(head: &str, shapes: &[&str], tail: &str, n: usize) -> String {
    let mut s = head.to_owned();
    for i in 0..n {
        s.push_str(&shapes[i % shapes.len()].replace("{n}", &i.to_string()));
    }
    s.push_str(tail);
    s
}

/// (work, findings) for one file of `n` functions.
fn review(lang: Lang, name: &str, src: &str) -> (u64, usize) {
    let before = work::done();
    let out = super::file(Path::new(name), lang, src);
    (work::done() - before, out.findings.len())
}

fn check(lang: Lang, name: &str, head: &str, shapes: &[&str], tail: &str) {
    let n = 40 * shapes.len();
    let (w1, f1) = review(lang, name, &source(head, shapes, tail, n));
    let (w2, f2) = review(lang, name, &source(head, shapes, tail, 2 * n));
    assert!(f1 > 0 && f2 == 2 * f1, "{lang}: {f1} then {f2} findings");
    assert!(w1 > 0, "{lang}: no work counted");
    // Twice the functions: twice the work, and a little for what is per file.
    assert!(w2 <= 2 * w1 + w1 / 10, "{lang}: work {w1} for {n} functions, {w2} for {}", 2 * n);
}

#[test]
fn python_work_grows_with_the_file() {
    check(Lang::Python, "locks.py", "import redis\n\n", PY, "");
}

#[test]
fn go_work_grows_with_the_file() {
    let head =
        "package locks\n\nimport (\n\t\"context\"\n\n\t\"github.com/redis/go-redis/v9\"\n)\n\n";
    check(Lang::Go, "locks.go", head, GO, "");
}

#[test]
fn java_work_grows_with_the_file() {
    check(
        Lang::Java,
        "Locks.java",
        "import redis.clients.jedis.Jedis;\n\nclass Locks {\n",
        JAVA,
        "}\n",
    );
}

#[test]
fn javascript_work_grows_with_the_file() {
    check(Lang::JavaScript, "locks.js", "const Redis = require('ioredis');\n\n", JS, "");
}
