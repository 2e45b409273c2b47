#!/usr/bin/env python3
"""Generates one source file of N lock functions for timing `leasehold review` against file
size (scripts/bench-review-scale). Every function is the same SETNX, then EXPIRE, then a bare
DEL of its own key, so each one yields the same findings and the work per function is the same:
time and memory should grow in proportion to the file's bytes.

    python3 scripts/review_scale_gen.py --lang python --bytes 1600000 > big.py

--lang is python, java, go or javascript; --bytes is the size to reach (the file stops at the
first whole function past it); --shape mixed (Python) cycles through five kinds of lock function
instead of the one. Deterministic: no randomness.
"""

import argparse
import sys

PY = '''def f_{n}(r):
    if r.setnx("lock:{n}", "1"):
        r.expire("lock:{n}", 10)
        r.delete("lock:{n}")

'''

JAVA_HEAD = "import redis.clients.jedis.Jedis;\n\npublic class Locks {\n"
JAVA = '''    void f{n}(Jedis r) {{
        if (r.setnx("lock:{n}", "1") == 1) {{
            r.expire("lock:{n}", 10);
            r.del("lock:{n}");
        }}
    }}

'''
JAVA_TAIL = "}\n"

GO_HEAD = 'package locks\n\nimport (\n\t"context"\n\n\t"github.com/redis/go-redis/v9"\n)\n\n'
GO = '''func f{n}(ctx context.Context, r *redis.Client) bool {{
	ok, err := r.SetNX(ctx, "lock:{n}", "1", 0).Result()
	if err != nil {{
		return false
	}}
	if ok {{
		r.Expire(ctx, "lock:{n}", 10)
		r.Del(ctx, "lock:{n}")
	}}
	return ok
}}

'''

JS_HEAD = "const Redis = require('ioredis');\n\n"
JS = '''async function f{n}(r) {{
  if (await r.setnx('lock:{n}', '1')) {{
    await r.expire('lock:{n}', 10);
    await r.del('lock:{n}');
  }}
}}

'''

# Python, --shape mixed: five kinds of lock function in turn, to reach the lookups the plain
# shape does not (a key and a reply in locals, GET then DEL, a Lua release script in a
# constant, a SQL advisory lock through a cursor, an except clause around the acquire, a
# wrapper whose callers drop its answer, an HTTP write under the lock).
PY_MIXED = [
    '''def f_{n}(r):
    if r.setnx("lock:{n}", "1"):
        r.expire("lock:{n}", 10)
        r.delete("lock:{n}")

''',
    '''def g_{n}(r):
    key = "lock:job:{n}"
    ok = r.set(key, "1", nx=True, ex=10)
    if not ok:
        return False
    requests.post("http://billing/{n}")
    if r.get(key) == "1":
        r.delete(key)
    return True

''',
    '''RELEASE_{n} = """if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("del", KEYS[1]) end return 0"""


def h_{n}(r, token):
    acquired = r.set("lock:h:{n}", token, nx=True, px=30000)
    if acquired:
        r.eval(RELEASE_{n}, 1, "lock:h:{n}", token)

''',
    '''def s_{n}(conn):
    cur = conn.cursor()
    cur.execute("SELECT pg_try_advisory_lock({n})")
    if cur.fetchone()[0]:
        cur.execute("SELECT pg_advisory_unlock({n})")

''',
    '''def t_{n}(r):
    try:
        got = r.set("lock:t:{n}", "x", nx=True, ex=5)
    except redis.RedisError:
        return False
    return got


def u_{n}(r):
    t_{n}(r)

''',
]

LANGS = {
    "python": ("", PY, ""),
    "java": (JAVA_HEAD, JAVA, JAVA_TAIL),
    "go": (GO_HEAD, GO, ""),
    "javascript": (JS_HEAD, JS, ""),
}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lang", choices=sorted(LANGS), default="python")
    ap.add_argument("--bytes", type=int, required=True)
    ap.add_argument("--shape", choices=["plain", "mixed"], default="plain")
    a = ap.parse_args()
    head, body, tail = LANGS[a.lang]
    bodies = [body]
    if a.shape == "mixed":
        if a.lang != "python":
            ap.error("--shape mixed is Python only")
        bodies = PY_MIXED
    out = [head]
    size = len(head) + len(tail)
    n = 0
    while size < a.bytes:
        f = bodies[n % len(bodies)].format(n=n)
        out.append(f)
        size += len(f)
        n += 1
    out.append(tail)
    sys.stdout.write("".join(out))


if __name__ == "__main__":
    main()
