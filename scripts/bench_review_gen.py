#!/usr/bin/env python3
"""Generates the source tree `scripts/bench-review` times `leasehold review` and semgrep on.

Deterministic: the same --seed and --lines give the same tree, byte for byte (one
random.Random, no iteration over sets or hashes). Eight languages, shares of lines roughly
Python 20 %, Java 15 %, Go 15 %, JavaScript 12 %, TypeScript 12 %, Rust 10 %, PHP 8 %,
Ruby 8 %, in files of 50-800 lines of ordinary application code (classes, functions, loops,
HTTP handlers, ORM calls, caches, constants, comments). About one file in 20 also holds lock
code written against real client APIs (redis SET NX with and without expiry, SETNX then
EXPIRE, bare DEL of a lock key, GET then DEL, Lua release scripts in strings,
pg_try_advisory_lock in SQL strings, tryLock, Redlock, Cache::lock, ...), buggy and correct
forms alike. Other files hold what any code base has that mentions locks without being a
distributed lock: in-process mutexes, account lock-outs.

Writes OUT/tree/... (the tree to scan) and OUT/manifest.json (what was planted where, and
how many sites each of the two compared rules should flag by intent).

    python3 scripts/bench_review_gen.py --out /tmp/review-tree --lines 1000000 --seed 20240611
"""

import argparse
import json
import math
import os
import random
import re
import sys
import textwrap

SHARES = [
    ("python", 0.20),
    ("java", 0.15),
    ("go", 0.15),
    ("javascript", 0.12),
    ("typescript", 0.12),
    ("rust", 0.10),
    ("php", 0.08),
    ("ruby", 0.08),
]

LOCK_FILE_RATE = 1 / 20  # files with distributed-lock code
MUTEX_FILE_RATE = 1 / 15  # files with an in-process mutex (not a distributed lock)
LOCKOUT_FILE_RATE = 1 / 80  # files with account lock-out code (the word, not a lock)

NOUNS = """account order invoice payment customer product cart shipment report session user
profile address ticket comment review rating coupon discount tax warehouse inventory item
vendor supplier contract subscription plan quota usage event message notification email
webhook job task batch schedule slot booking reservation room device sensor reading metric
alert incident deployment build release artifact tenant team member role permission token
upload document page asset image thumbnail region zone store branch ledger entry transfer
refund charge balance wallet card merchant category tag label feed post thread channel
audit snapshot backup policy rule workflow step stage pipeline queue worker
""".split()

VERBS = """load save fetch update sync process compute render build parse validate apply
merge resolve refresh reconcile archive publish dispatch notify collect normalize enrich
import export schedule cancel approve reject assign release retry index rebuild expire
""".split()

ADJS = """pending active stale primary cached remote local daily hourly default current
previous next expired failed partial total raw clean""".split()

FIELDS = """id name status created_at updated_at amount currency owner_id email title count
price quantity region kind priority version score enabled deleted_at external_id note
""".split()

EXCEPTIONS_PY = ["ValueError", "KeyError", "RuntimeError", "LookupError", "TimeoutError"]

WORDS = """the a of to for with on when if not is are be this that it from by as at or
retry value cache request response record field state later first after before each all
upstream client server timeout limit window total batch page cursor offset result error
""".split()


def t(template, **kw):
    """Fills «name» markers (braces, %, $ and @ all belong to the target languages)."""
    s = textwrap.dedent(template).strip("\n")
    return re.sub("«(\\w+)»", lambda m: str(kw[m.group(1)]), s).split("\n") + [""]


def ind(lines, n):
    pad = " " * n
    return [pad + l if l else l for l in lines]


def snake(*parts):
    return "_".join(parts)


def camel(*parts):
    return parts[0] + "".join(p.capitalize() for p in parts[1:])


def pascal(*parts):
    return "".join(p.capitalize() for p in parts)


class Ctx:
    """Per-file naming: a domain noun and a few related nouns, so a file reads as one thing."""

    def __init__(self, rng, serial):
        self.rng = rng
        self.serial = serial
        self.domain = rng.choice(NOUNS)
        self.others = rng.sample(NOUNS, 5)

    def noun(self):
        return self.domain if self.rng.random() < 0.4 else self.rng.choice(self.others)

    def verb(self):
        return self.rng.choice(VERBS)

    def adj(self):
        return self.rng.choice(ADJS)

    def field(self):
        return self.rng.choice(FIELDS)

    def uniq(self):
        """The file's serial number: paths never collide."""
        return self.serial

    def sentence(self, lo=5, hi=14):
        words = [self.rng.choice(WORDS + [self.noun()]) for _ in range(self.rng.randint(lo, hi))]
        return " ".join(words).capitalize()

    def int(self, lo=1, hi=500):
        return self.rng.randint(lo, hi)

    def lock_key_name(self, style):
        """The lock key's variable name: most mention the lock, some do not (as in real code)."""
        r = self.rng.random()
        if r < 0.78:
            return {"snake": "lock_key", "camel": "lockKey"}[style]
        if r < 0.88:
            return {"snake": "lock_name", "camel": "lockName"}[style]
        if r < 0.94:
            return {"snake": "mutex_key", "camel": "mutexKey"}[style]
        return {"snake": "resource_key", "camel": "resourceKey"}[style]


LUA_RELEASE = [
    'if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("del", KEYS[1]) else return 0 end',
    "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0",
]


# ----------------------------------------------------------------------------- Python


class Python:
    ext = ".py"

    def path(self, rng, svc, ctx):
        sub = rng.choice(["app/handlers", "app/services", "app/models", "app/tasks", "lib", "app/api"])
        return f"{svc}/{sub}/{ctx.domain}_{rng.choice(['service', 'views', 'models', 'tasks', 'utils', 'api', 'store'])}_{ctx.uniq()}.py"

    def header(self, ctx):
        rng = ctx.rng
        lines = ['"""' + ctx.sentence() + '."""', ""]
        mods = ["import json", "import logging", "import os", "import time", "from datetime import datetime, timedelta",
                "from typing import Any, Dict, List, Optional", "import uuid", "from dataclasses import dataclass, field",
                "from flask import Blueprint, jsonify, request, abort", "from sqlalchemy import select, and_",
                "import redis", "from decimal import Decimal", "import hashlib", "from collections import defaultdict"]
        lines += sorted(rng.sample(mods, rng.randint(4, 9)))
        lines += ["", f"from .models import {pascal(ctx.domain)}, {pascal(ctx.others[0])}", f"from .db import db, session_scope",
                  "", "logger = logging.getLogger(__name__)", f'bp = Blueprint("{ctx.domain}", __name__)',
                  'cache = redis.Redis.from_url(os.environ.get("REDIS_URL", "redis://localhost:6379/0"))', ""]
        return lines

    def footer(self, ctx):
        return []

    def stmts(self, ctx, n, depth=0):
        rng = ctx.rng
        out = []
        for _ in range(n):
            k = rng.randint(0, 9 if depth < 2 else 5)
            a, b, f = ctx.noun(), ctx.noun(), ctx.field()
            if k == 0:
                out.append(f"{a}_{f} = {b}.{f} if {b} is not None else None")
            elif k == 1:
                out.append(f"{a}s = [x.{f} for x in {b}_items if x.{ctx.field()}]")
            elif k == 2:
                out.append(f'logger.info("{ctx.verb()} {a} %s: {ctx.sentence(2, 5).lower()}", {b}_id)')
            elif k == 3:
                out.append(f'{a}_key = f"{a}:{{{b}_id}}:{f}"')
            elif k == 4:
                out.append(f"result = {ctx.verb()}_{a}({b}_id, limit={ctx.int(10, 200)})")
            elif k == 5:
                out.append(f"# {ctx.sentence()}")
                out.append(f"payload = {{\"{f}\": {a}.{f}, \"{ctx.field()}\": {ctx.int()}, \"source\": \"{b}\"}}")
            elif k == 6:
                out.append(f"for {a} in {b}_items:")
                out += ind(self.stmts(ctx, rng.randint(1, 3), depth + 1), 4)
                out.append(f"    total += {a}.{ctx.rng.choice(['amount', 'count', 'quantity'])}")
            elif k == 7:
                out.append(f"if {a}.{f} is None:")
                out.append(f'    raise {rng.choice(EXCEPTIONS_PY)}("{a} {f} missing: %s" % {a}.id)')
                if rng.random() < 0.5:
                    out.append(f"elif {a}.status == \"{ctx.adj()}\":")
                    out += ind(self.stmts(ctx, rng.randint(1, 2), depth + 1), 4)
            elif k == 8:
                out.append("try:")
                out += ind(self.stmts(ctx, rng.randint(1, 3), depth + 1), 4)
                out.append(f"except {rng.choice(EXCEPTIONS_PY)} as exc:")
                out.append(f'    logger.warning("could not {ctx.verb()} {a}: %s", exc)')
                out.append("    raise")
            else:
                out.append(f"while {a}_queue:")
                out.append(f"    {a} = {a}_queue.pop()")
                out += ind(self.stmts(ctx, rng.randint(1, 2), depth + 1), 4)
        return out

    def block_function(self, ctx):
        rng = ctx.rng
        n, v = ctx.noun(), ctx.verb()
        lines = [f"def {v}_{n}_{ctx.adj()}({n}_id: int, {ctx.noun()}_items: List[Any], limit: int = {ctx.int(10, 100)}) -> Optional[Dict[str, Any]]:",
                 f'    """{ctx.sentence()}.', "", f"    {ctx.sentence()}.", '    """', "    total = 0"]
        lines += ind(self.stmts(ctx, rng.randint(3, 10)), 4)
        lines.append(f'    return {{"{n}_id": {n}_id, "total": total}}')
        return lines + ["", ""]

    def block_class(self, ctx):
        rng = ctx.rng
        n = ctx.noun()
        cls = pascal(n, rng.choice(["service", "manager", "repository", "client", "processor"]))
        fs = rng.sample(FIELDS, 3)
        lines = [f"class {cls}:", f'    """{ctx.sentence()}."""', "",
                 f"    def __init__(self, session, {fs[0]}=None, {fs[1]}=None):",
                 "        self.session = session", f"        self.{fs[0]} = {fs[0]}", f"        self.{fs[1]} = {fs[1]} or {{}}",
                 f"        self._{fs[2]} = {ctx.int()}", ""]
        for _ in range(rng.randint(2, 5)):
            m = f"{ctx.verb()}_{ctx.noun()}"
            lines += [f"    def {m}(self, {n}_id, {ctx.noun()}_items=(), **kwargs):", "        total = 0"]
            lines += ind(self.stmts(ctx, rng.randint(2, 7)), 8)
            lines += [f"        return total", ""]
        return lines + [""]

    def block_handler(self, ctx):
        rng = ctx.rng
        n, o = ctx.noun(), ctx.noun()
        M = pascal(n)
        lines = [f'@bp.route("/api/v{rng.randint(1, 3)}/{n}s/<int:{n}_id>", methods=["{rng.choice(["GET", "POST", "PUT", "DELETE"])}"])',
                 f"def {ctx.verb()}_{n}_view({n}_id):",
                 f"    {n} = db.session.execute(select({M}).where({M}.id == {n}_id)).scalar_one_or_none()",
                 f"    if {n} is None:", "        abort(404)",
                 "    data = request.get_json(silent=True) or {}",
                 f'    {o}s = {pascal(o)}.query.filter_by({n}_id={n}_id, status="{ctx.adj()}").order_by({pascal(o)}.created_at.desc()).limit({ctx.int(10, 100)}).all()']
        lines += ind(self.stmts(ctx, rng.randint(1, 5)), 4)
        lines += [f"    db.session.commit()",
                  f'    return jsonify({{"id": {n}.id, "{o}s": [x.to_dict() for x in {o}s]}}), 200', "", ""]
        return lines

    def block_cache(self, ctx):
        rng = ctx.rng
        n = ctx.noun()
        lines = [f"def get_{n}_cached({n}_id, ttl={rng.choice([60, 300, 900, 3600])}):",
                 f'    key = f"{n}:v{rng.randint(1, 4)}:{{{n}_id}}"',
                 "    raw = cache.get(key)", "    if raw is not None:", "        return json.loads(raw)",
                 f"    value = load_{n}({n}_id)", "    cache.set(key, json.dumps(value), ex=ttl)", "    return value", "", "",
                 f"def invalidate_{n}({n}_id):", f'    cache.delete(f"{n}:v{rng.randint(1, 4)}:{{{n}_id}}")', "", ""]
        if rng.random() < 0.3:
            lines += [f"def seen_{n}_event(event_id):", f"    # dedupe redelivered events for a day",
                      f'    return not cache.set(f"seen:{n}:{{event_id}}", 1, nx=True, ex=86400)', "", ""]
        return lines

    def block_constants(self, ctx):
        rng = ctx.rng
        lines = [f"# {ctx.sentence()}"]
        for _ in range(rng.randint(3, 9)):
            lines.append(f'{ctx.noun().upper()}_{ctx.field().upper()} = "{ctx.sentence(2, 6).lower()}"')
        lines.append(f"{ctx.noun().upper()}_LIMITS = {{")
        for _ in range(rng.randint(2, 6)):
            lines.append(f'    "{ctx.noun()}": {ctx.int(1, 10000)},')
        return lines + ["}", "", ""]

    def block_dataclass(self, ctx):
        rng = ctx.rng
        lines = ["@dataclass", f"class {pascal(ctx.noun(), ctx.adj())}Record:"]
        for f in rng.sample(FIELDS, rng.randint(3, 8)):
            lines.append(f"    {f}: {rng.choice(['int', 'str', 'Optional[str]', 'Decimal', 'datetime', 'bool'])} = None")
        lines += ["", "    def to_dict(self):", "        return {k: v for k, v in self.__dict__.items() if v is not None}", "", ""]
        return lines

    blocks = [("block_function", 4), ("block_class", 3), ("block_handler", 3), ("block_cache", 1),
              ("block_constants", 1), ("block_dataclass", 1)]

    def mutex(self, ctx):
        n = ctx.noun()
        return ["import threading", "", f"_{n}_lock = threading.Lock()", f"_{n}_registry = {{}}", "", "",
                f"def register_{n}(name, value):", f"    with _{n}_lock:", f"        _{n}_registry[name] = value", "", ""]

    def lockout(self, ctx):
        return ["def record_failed_login(user_id):", '    key = f"login:failures:{user_id}"', "    n = cache.incr(key)",
                "    cache.expire(key, 900)", "    if n >= 5:", '        cache.set(f"account:locked:{user_id}", 1, ex=900)', "",
                "", "def clear_lockout(user_id):", '    cache.delete(f"account:locked:{user_id}")', "", ""]

    # Lock snippets: (name, rules this code breaks by intent among the two compared, builder)
    def lock_setnx_expire(self, ctx, k):
        n = ctx.noun()
        return t("""
            def «v»_«n»_exclusively(«n»_id):
                «k» = f"lock:«n»:{«n»_id}"
                if not cache.setnx(«k», 1):
                    logger.info("«n» %s is being processed elsewhere", «n»_id)
                    return False
                cache.expire(«k», «ttl»)
                try:
                    «v»_«n»(«n»_id)
                finally:
                    cache.delete(«k»)
                return True


        """, v=ctx.verb(), n=n, k=k, ttl=ctx.int(10, 120))

    def lock_set_nx_no_ttl(self, ctx, k):
        return t("""
            def run_«n»_job(job_id):
                «k» = "locks:«n»-job:" + str(job_id)
                token = uuid.uuid4().hex
                acquired = cache.set(«k», token, nx=True)
                if not acquired:
                    return None
                try:
                    return «v»_«n»s(job_id)
                finally:
                    cache.delete(«k»)


        """, n=ctx.noun(), v=ctx.verb(), k=k)

    def lock_set_nx_px_lua(self, ctx, k):
        return t("""
            RELEASE_SCRIPT = \"\"\"
            «lua»
            \"\"\"


            def with_«n»_lock(«n»_id, fn, ttl_ms=«ttl»):
                «k» = f"lock:«n»:{«n»_id}"
                token = uuid.uuid4().hex
                if not cache.set(«k», token, nx=True, px=ttl_ms):
                    raise RuntimeError("«n» %s is locked" % «n»_id)
                try:
                    return fn()
                finally:
                    cache.eval(RELEASE_SCRIPT, 1, «k», token)


        """, n=ctx.noun(), k=k, ttl=ctx.int(5, 60) * 1000, lua=ctx.rng.choice(LUA_RELEASE))

    def lock_set_ex_bare_del(self, ctx, k):
        return t("""
            def «v»_«n»_once(«n»_id):
                «k» = "«n»_lock_%s" % «n»_id
                if cache.set(«k», os.getpid(), nx=True, ex=«ttl»):
                    try:
                        «v»_«n»(«n»_id)
                    finally:
                        cache.delete(«k»)


        """, n=ctx.noun(), v=ctx.verb(), k=k, ttl=ctx.int(30, 600))

    def lock_get_then_del(self, ctx, k):
        return t("""
            class «N»Lock:
                def __init__(self, client, name, ttl=«ttl»):
                    self.client = client
                    self.«k» = "lock:" + name
                    self.ttl = ttl
                    self.token = uuid.uuid4().hex

                def acquire(self):
                    return bool(self.client.set(self.«k», self.token, nx=True, ex=self.ttl))

                def release(self):
                    if self.client.get(self.«k») == self.token.encode():
                        self.client.delete(self.«k»)


        """, N=pascal(ctx.noun()), k=k, ttl=ctx.int(10, 300))

    def lock_pg_advisory(self, ctx, k):
        return t("""
            def «v»_«n»_singleton(conn, «n»_id):
                with conn.cursor() as cur:
                    cur.execute("SELECT pg_try_advisory_lock(%s)", («n»_id,))
                    (locked,) = cur.fetchone()
                    if not locked:
                        return False
                    try:
                        «v»_«n»(«n»_id)
                    finally:
                        cur.execute("SELECT pg_advisory_unlock(%s)", («n»_id,))
                return True


        """, n=ctx.noun(), v=ctx.verb())

    def lock_redis_py_lock(self, ctx, k):
        return t("""
            def «v»_«n»_guarded(«n»_id):
                with cache.lock(f"lock:«n»:{«n»_id}", timeout=«ttl», blocking_timeout=5):
                    return «v»_«n»(«n»_id)


        """, n=ctx.noun(), v=ctx.verb(), ttl=ctx.int(10, 120))

    locks = [("setnx_expire", ["nx-without-expiry", "release-without-owner-check"]),
             ("set_nx_no_ttl", ["nx-without-expiry", "release-without-owner-check"]),
             ("set_nx_px_lua", []),
             ("set_ex_bare_del", ["release-without-owner-check"]),
             ("get_then_del", ["release-without-owner-check"]),
             ("pg_advisory", []),
             ("redis_py_lock", [])]
    key_style = "snake"


# ----------------------------------------------------------------------------- Java


class Java:
    ext = ".java"
    key_style = "camel"

    def path(self, rng, svc, ctx):
        self.cls = pascal(ctx.domain, rng.choice(["service", "controller", "repository", "handler", "job", "client"])) + str(ctx.uniq())
        self.pkg = f"com.acme.{svc.replace('-', '')}.{rng.choice(['service', 'web', 'repo', 'jobs', 'domain'])}"
        return f"{svc}/src/main/java/{self.pkg.replace('.', '/')}/{self.cls}.java"

    def header(self, ctx):
        rng = ctx.rng
        imps = ["java.util.List", "java.util.Map", "java.util.Optional", "java.util.ArrayList", "java.util.HashMap",
                "java.time.Duration", "java.time.Instant", "java.util.UUID", "java.util.concurrent.TimeUnit",
                "org.slf4j.Logger", "org.slf4j.LoggerFactory", "org.springframework.stereotype.Service",
                "org.springframework.web.bind.annotation.*", "org.springframework.data.redis.core.StringRedisTemplate",
                "org.springframework.transaction.annotation.Transactional", "redis.clients.jedis.Jedis",
                "java.util.stream.Collectors", "java.sql.Connection", "java.sql.PreparedStatement", "java.sql.ResultSet"]
        lines = [f"package {self.pkg};", ""] + [f"import {i};" for i in sorted(rng.sample(imps, rng.randint(6, 12)))]
        lines += ["", "/**", f" * {ctx.sentence()}.", " */",
                  rng.choice(["@Service", "@RestController", "@Component"]), f"public class {self.cls} {{",
                  f"    private static final Logger log = LoggerFactory.getLogger({self.cls}.class);",
                  f"    private final {pascal(ctx.domain)}Repository {ctx.domain}Repository;",
                  "    private final StringRedisTemplate redisTemplate;", "    private final Jedis jedis;", ""]
        return lines

    def footer(self, ctx):
        return ["}"]

    def stmts(self, ctx, n, depth=0):
        rng = ctx.rng
        out = []
        for _ in range(n):
            k = rng.randint(0, 8 if depth < 2 else 5)
            a, b, f = ctx.noun(), ctx.noun(), camel(*ctx.field().split("_"))
            if k == 0:
                out.append(f"var {a}{pascal(f)} = {b}.get{pascal(f)}();")
            elif k == 1:
                out.append(f"List<String> {a}Names = {b}Items.stream().filter(x -> x.is{pascal(ctx.adj())}()).map(x -> x.get{pascal(f)}()).collect(Collectors.toList());")
            elif k == 2:
                out.append(f'log.info("{ctx.verb()} {a} {{}}: {ctx.sentence(2, 5).lower()}", {b}Id);')
            elif k == 3:
                out.append(f'String {a}Key = "{a}:" + {b}Id + ":{f}";')
            elif k == 4:
                out.append(f"// {ctx.sentence()}")
                out.append(f"total += {ctx.verb()}{pascal(a)}({b}Id, {ctx.int(10, 200)});")
            elif k == 5:
                out.append(f"if ({a} == null) {{")
                out.append(f'    throw new IllegalStateException("{a} {f} missing for " + {b}Id);')
                out.append("}")
            elif k == 6:
                out.append(f"for (var {a} : {b}Items) {{")
                out += ind(self.stmts(ctx, rng.randint(1, 3), depth + 1), 4)
                out.append("}")
            elif k == 7:
                out.append("try {")
                out += ind(self.stmts(ctx, rng.randint(1, 3), depth + 1), 4)
                out.append(f"}} catch ({rng.choice(['IllegalArgumentException', 'RuntimeException', 'IOException'])} e) {{")
                out.append(f'    log.warn("could not {ctx.verb()} {a}", e);')
                out.append("    throw e;")
                out.append("}")
            else:
                out.append(f"Map<String, Object> {a}Payload = new HashMap<>();")
                out.append(f'{a}Payload.put("{f}", {b}.get{pascal(f)}());')
                out.append(f'{a}Payload.put("source", "{b}");')
        return out

    def method(self, ctx, sig, body_n):
        lines = ["    /**", f"     * {ctx.sentence()}.", "     */", f"    {sig} {{", "        long total = 0;"]
        lines += ind(self.stmts(ctx, body_n), 8)
        return lines + ["        return total;", "    }", ""]

    def block_method(self, ctx):
        n = ctx.noun()
        return self.method(ctx, f"public long {ctx.verb()}{pascal(n)}(long {n}Id, List<{pascal(ctx.noun())}> {ctx.noun()}Items)", ctx.rng.randint(3, 10))

    def block_handler(self, ctx):
        rng = ctx.rng
        n, o = ctx.noun(), ctx.noun()
        verb = rng.choice(["Get", "Post", "Put", "Delete"])
        lines = [f'    @{verb}Mapping("/api/v{rng.randint(1, 3)}/{n}s/{{id}}")',
                 f"    public ResponseEntity<{pascal(n)}Dto> {ctx.verb()}{pascal(n)}(@PathVariable long id, @RequestBody(required = false) Map<String, Object> body) {{",
                 f"        {pascal(n)} {n} = {n}Repository.findById(id).orElseThrow(() -> new ResponseStatusException(HttpStatus.NOT_FOUND));",
                 f'        List<{pascal(o)}> {o}Items = {o}Repository.findBy{pascal(n)}IdAndStatusOrderByCreatedAtDesc(id, "{ctx.adj()}");',
                 "        long total = 0;"]
        lines += ind(self.stmts(ctx, rng.randint(1, 5)), 8)
        lines += [f"        {n}Repository.save({n});", f"        return ResponseEntity.ok({pascal(n)}Dto.from({n}, {o}Items));", "    }", ""]
        return lines

    def block_cache(self, ctx):
        n = ctx.noun()
        return [f"    public Optional<String> cached{pascal(n)}(long {n}Id) {{",
                f'        String key = "{n}:v{ctx.rng.randint(1, 4)}:" + {n}Id;',
                "        String raw = redisTemplate.opsForValue().get(key);", "        if (raw != null) {",
                "            return Optional.of(raw);", "        }",
                f"        String value = load{pascal(n)}Json({n}Id);",
                f"        redisTemplate.opsForValue().set(key, value, Duration.ofSeconds({ctx.rng.choice([60, 300, 900])}));",
                "        return Optional.ofNullable(value);", "    }", "",
                f"    public void evict{pascal(n)}(long {n}Id) {{", f'        redisTemplate.delete("{n}:v1:" + {n}Id);', "    }", ""]

    def block_constants(self, ctx):
        lines = [f"    // {ctx.sentence()}"]
        for _ in range(ctx.rng.randint(3, 8)):
            lines.append(f'    private static final String {ctx.noun().upper()}_{ctx.field().upper()} = "{ctx.sentence(2, 6).lower()}";')
        lines.append(f"    private static final int MAX_{ctx.noun().upper()}S = {ctx.int(1, 5000)};")
        return lines + [""]

    def block_jpa(self, ctx):
        n = ctx.noun()
        return [f"    @Transactional(readOnly = true)",
                f"    public List<{pascal(n)}> find{pascal(ctx.adj())}{pascal(n)}s(String region, int limit) {{",
                f'        return entityManager.createQuery("select x from {pascal(n)} x where x.region = :region and x.status = :status order by x.createdAt desc", {pascal(n)}.class)',
                '                .setParameter("region", region)', f'                .setParameter("status", "{ctx.adj()}")',
                "                .setMaxResults(limit)", "                .getResultList();", "    }", ""]

    blocks = [("block_method", 6), ("block_handler", 3), ("block_cache", 1), ("block_constants", 1), ("block_jpa", 2)]

    def mutex(self, ctx):
        n = ctx.noun()
        return [f"    private final Object {n}Monitor = new Object();", f"    private final Map<String, Long> {n}Counts = new HashMap<>();", "",
                f"    public void count{pascal(n)}(String name) {{", f"        synchronized ({n}Monitor) {{",
                f"            {n}Counts.merge(name, 1L, Long::sum);", "        }", "    }", ""]

    def lockout(self, ctx):
        return ["    public void recordFailedLogin(long userId) {", '        Long n = redisTemplate.opsForValue().increment("login:failures:" + userId);',
                "        if (n != null && n >= 5) {", '            redisTemplate.opsForValue().set("account:locked:" + userId, "1", Duration.ofMinutes(15));',
                "        }", "    }", "", "    public void clearLockout(long userId) {", '        redisTemplate.delete("account:locked:" + userId);', "    }", ""]

    def lock_jedis_setnx_expire(self, ctx, k):
        return t("""
                public boolean «v»«N»Exclusively(long «n»Id) {
                    String «k» = "lock:«n»:" + «n»Id;
                    if (jedis.setnx(«k», "1") == 0L) {
                        log.info("«n» {} busy", «n»Id);
                        return false;
                    }
                    jedis.expire(«k», «ttl»);
                    try {
                        «v»«N»(«n»Id);
                    } finally {
                        jedis.del(«k»);
                    }
                    return true;
                }

        """, v=ctx.verb(), n=(n := ctx.noun()), N=pascal(n), k=k, ttl=ctx.int(10, 120))

    def lock_spring_setifabsent_2(self, ctx, k):
        return t("""
                public void «v»«N»Job(String jobId) {
                    String «k» = "lock:«n»-job:" + jobId;
                    String token = UUID.randomUUID().toString();
                    Boolean ok = redisTemplate.opsForValue().setIfAbsent(«k», token);
                    if (!Boolean.TRUE.equals(ok)) {
                        return;
                    }
                    redisTemplate.expire(«k», Duration.ofSeconds(«ttl»));
                    try {
                        «v»«N»s(jobId);
                    } finally {
                        redisTemplate.delete(«k»);
                    }
                }

        """, v=ctx.verb(), n=(n := ctx.noun()), N=pascal(n), k=k, ttl=ctx.int(10, 300))

    def lock_spring_setifabsent_lua(self, ctx, k):
        return t("""
                private static final DefaultRedisScript<Long> RELEASE_«U» = new DefaultRedisScript<>(
                        "«lua»", Long.class);

                public <T> T with«N»Lock(long «n»Id, Supplier<T> work) {
                    String «k» = "lock:«n»:" + «n»Id;
                    String token = UUID.randomUUID().toString();
                    Boolean ok = redisTemplate.opsForValue().setIfAbsent(«k», token, Duration.ofMillis(«ttl»));
                    if (!Boolean.TRUE.equals(ok)) {
                        throw new IllegalStateException("«n» " + «n»Id + " is locked");
                    }
                    try {
                        return work.get();
                    } finally {
                        redisTemplate.execute(RELEASE_«U», List.of(«k»), token);
                    }
                }

        """, n=(n := ctx.noun()), N=pascal(n), U=n.upper(), k=k, ttl=ctx.int(5, 60) * 1000,
                 lua=ctx.rng.choice(LUA_RELEASE).replace('"', '\\"'))

    def lock_jedis_set_params_lua(self, ctx, k):
        return t("""
                private static final String RELEASE_SCRIPT =
                        "«lua»";

                public boolean «v»«N»Once(long «n»Id) {
                    String «k» = "lock:«n»:" + «n»Id;
                    String token = UUID.randomUUID().toString();
                    String reply = jedis.set(«k», token, SetParams.setParams().nx().px(«ttl»));
                    if (!"OK".equals(reply)) {
                        return false;
                    }
                    try {
                        «v»«N»(«n»Id);
                        return true;
                    } finally {
                        jedis.eval(RELEASE_SCRIPT, Collections.singletonList(«k»), Collections.singletonList(token));
                    }
                }

        """, v=ctx.verb(), n=(n := ctx.noun()), N=pascal(n), k=k, ttl=ctx.int(5, 60) * 1000,
                 lua=ctx.rng.choice(LUA_RELEASE).replace('"', '\\"'))

    def lock_redisson_trylock(self, ctx, k):
        return t("""
                public void «v»«N»Guarded(long «n»Id) throws InterruptedException {
                    RLock lock = redisson.getLock("lock:«n»:" + «n»Id);
                    if (lock.tryLock(«wait», «ttl», TimeUnit.SECONDS)) {
                        try {
                            «v»«N»(«n»Id);
                        } finally {
                            lock.unlock();
                        }
                    }
                }

        """, v=ctx.verb(), n=(n := ctx.noun()), N=pascal(n), wait=ctx.int(1, 10), ttl=ctx.int(10, 120))

    def lock_jdbc_advisory(self, ctx, k):
        return t("""
                public boolean «v»«N»Singleton(Connection conn, long «n»Id) throws SQLException {
                    try (PreparedStatement ps = conn.prepareStatement("SELECT pg_try_advisory_lock(?)")) {
                        ps.setLong(1, «n»Id);
                        try (ResultSet rs = ps.executeQuery()) {
                            if (!rs.next() || !rs.getBoolean(1)) {
                                return false;
                            }
                        }
                    }
                    try {
                        «v»«N»(«n»Id);
                    } finally {
                        try (PreparedStatement ps = conn.prepareStatement("SELECT pg_advisory_unlock(?)")) {
                            ps.setLong(1, «n»Id);
                            ps.execute();
                        }
                    }
                    return true;
                }

        """, v=ctx.verb(), n=(n := ctx.noun()), N=pascal(n))

    def lock_get_then_del(self, ctx, k):
        return t("""
                public void release«N»(String «k», String token) {
                    if (token.equals(jedis.get(«k»))) {
                        jedis.del(«k»);
                    }
                }

        """, N=pascal(ctx.noun()), k=k)

    locks = [("jedis_setnx_expire", ["nx-without-expiry", "release-without-owner-check"]),
             ("spring_setifabsent_2", ["nx-without-expiry", "release-without-owner-check"]),
             ("spring_setifabsent_lua", []),
             ("jedis_set_params_lua", []),
             ("redisson_trylock", []),
             ("jdbc_advisory", []),
             ("get_then_del", ["release-without-owner-check"])]


# Java's lock snippets are written at class-member indent (4) in the template itself.
for _name in [n for n in dir(Java) if n.startswith("lock_")]:
    _f = getattr(Java, _name)

    def _wrap(self, ctx, k, _f=_f):
        return ind(_f(self, ctx, k), 4)

    setattr(Java, _name, _wrap)


# ----------------------------------------------------------------------------- Go


class Go:
    ext = ".go"
    key_style = "camel"

    def path(self, rng, svc, ctx):
        self.pkg = rng.choice(["handlers", "store", "service", "worker", "billing", "sync"])
        return f"{svc}/internal/{self.pkg}/{ctx.domain}_{rng.choice(['handler', 'store', 'service', 'worker', 'util'])}{ctx.uniq()}.go"

    def header(self, ctx):
        rng = ctx.rng
        imps = ['"context"', '"database/sql"', '"encoding/json"', '"errors"', '"fmt"', '"log/slog"', '"net/http"',
                '"strconv"', '"strings"', '"time"', '"github.com/redis/go-redis/v9"', '"github.com/google/uuid"',
                '"github.com/go-chi/chi/v5"', '"gorm.io/gorm"']
        lines = [f"// Package {self.pkg}: {ctx.sentence().lower()}.", f"package {self.pkg}", "", "import ("]
        lines += ["\t" + i for i in sorted(rng.sample(imps, rng.randint(5, 10)))]
        lines += [")", ""]
        return lines

    def footer(self, ctx):
        return []

    def stmts(self, ctx, n, depth=0):
        rng = ctx.rng
        out = []
        for _ in range(n):
            k = rng.randint(0, 8 if depth < 2 else 5)
            a, b, f = ctx.noun(), ctx.noun(), pascal(*ctx.field().split("_"))
            if k == 0:
                out.append(f"{a}{f} := {b}.{f}")
                out.append(f"_ = {a}{f}")
            elif k == 1:
                out.append(f'slog.Info("{ctx.verb()} {a}", "{b}", {b}ID, "{ctx.field()}", {ctx.int()})')
            elif k == 2:
                out.append(f'{a}Key := fmt.Sprintf("{a}:%d:{ctx.field()}", {b}ID)')
                out.append(f"_ = {a}Key")
            elif k == 3:
                out.append(f"// {ctx.sentence()}")
                out.append(f"total += len({b}Items) * {ctx.int(1, 20)}")
            elif k == 4:
                out.append(f"if {b}ID <= 0 {{")
                out.append(f'\treturn 0, fmt.Errorf("{ctx.verb()} {a}: invalid {b} id %d", {b}ID)')
                out.append("}")
            elif k == 5:
                out.append(f"if err := {ctx.verb()}{pascal(a)}(ctx, {b}ID); err != nil {{")
                out.append(f'\treturn 0, fmt.Errorf("{ctx.verb()} {a}: %w", err)')
                out.append("}")
            elif k == 6:
                out.append(f"for _, {a} := range {b}Items {{")
                out += ["\t" + l for l in self.stmts(ctx, rng.randint(1, 3), depth + 1)]
                out.append(f"\ttotal += {a}.{rng.choice(['Amount', 'Count', 'Quantity'])}")
                out.append("}")
            elif k == 7:
                out.append(f"switch {a}.Status {{")
                for s in rng.sample(ADJS, 2):
                    out.append(f'case "{s}":')
                    out += ["\t" + l for l in self.stmts(ctx, 1, depth + 1)]
                out.append("default:")
                out.append(f"\ttotal++")
                out.append("}")
            else:
                out.append(f"{a}Payload := map[string]any{{\"{ctx.field()}\": {b}ID, \"source\": \"{b}\"}}")
                out.append(f"_ = {a}Payload")
        return out

    def block_func(self, ctx):
        n, o = ctx.noun(), ctx.noun()
        lines = [f"// {pascal(ctx.verb(), n)} {ctx.sentence().lower()}.",
                 f"func {pascal(ctx.verb(), n, ctx.adj())}(ctx context.Context, {n}ID int64, {o}Items []{pascal(o)}) (int, error) {{",
                 "\ttotal := 0", f"\t{n}Items := {o}Items", f"\t_ = {n}Items"]
        lines += ["\t" + l for l in self.stmts(ctx, ctx.rng.randint(3, 10))]
        return lines + ["\treturn total, nil", "}", ""]

    def block_struct(self, ctx):
        n = ctx.noun()
        lines = [f"// {pascal(n)} {ctx.sentence().lower()}.", f"type {pascal(n, ctx.adj())} struct {{"]
        for f in ctx.rng.sample(FIELDS, ctx.rng.randint(3, 8)):
            lines.append(f'\t{pascal(*f.split("_"))} {ctx.rng.choice(["int64", "string", "*string", "time.Time", "bool", "float64"])} `json:"{f}" db:"{f}"`')
        return lines + ["}", ""]

    def block_handler(self, ctx):
        n, o = ctx.noun(), ctx.noun()
        lines = [f"func (h *Handler) {pascal(ctx.verb(), n)}(w http.ResponseWriter, r *http.Request) {{",
                 f'\t{n}ID, err := strconv.ParseInt(chi.URLParam(r, "id"), 10, 64)', "\tif err != nil {",
                 '\t\thttp.Error(w, "bad id", http.StatusBadRequest)', "\t\treturn", "\t}",
                 f"\tvar {n} {pascal(n)}",
                 f'\tif err := h.db.WithContext(r.Context()).Where("id = ? AND status = ?", {n}ID, "{ctx.adj()}").First(&{n}).Error; err != nil {{',
                 "\t\tif errors.Is(err, gorm.ErrRecordNotFound) {", '\t\t\thttp.NotFound(w, r)', "\t\t\treturn", "\t\t}",
                 '\t\thttp.Error(w, err.Error(), http.StatusInternalServerError)', "\t\treturn", "\t}",
                 f"\tvar {o}s []{pascal(o)}",
                 f'\th.db.Where("{n}_id = ?", {n}ID).Order("created_at desc").Limit({ctx.int(10, 100)}).Find(&{o}s)',
                 '\tw.Header().Set("Content-Type", "application/json")',
                 f'\t_ = json.NewEncoder(w).Encode(map[string]any{{"{n}": {n}, "{o}s": {o}s}})', "}", ""]
        return lines

    def block_cache(self, ctx):
        n = ctx.noun()
        return [f"func (s *Store) Cached{pascal(n)}(ctx context.Context, id int64) ([]byte, error) {{",
                f'\tkey := fmt.Sprintf("{n}:v{ctx.rng.randint(1, 4)}:%d", id)',
                "\tif raw, err := s.rdb.Get(ctx, key).Bytes(); err == nil {", "\t\treturn raw, nil", "\t}",
                f"\traw, err := s.load{pascal(n)}(ctx, id)", "\tif err != nil {", "\t\treturn nil, err", "\t}",
                f"\ts.rdb.Set(ctx, key, raw, {ctx.rng.choice([1, 5, 15])}*time.Minute)", "\treturn raw, nil", "}", "",
                f"func (s *Store) Evict{pascal(n)}(ctx context.Context, id int64) error {{",
                f'\treturn s.rdb.Del(ctx, fmt.Sprintf("{n}:v1:%d", id)).Err()', "}", ""]

    def block_constants(self, ctx):
        lines = [f"// {ctx.sentence()}.", "const ("]
        for _ in range(ctx.rng.randint(3, 8)):
            lines.append(f'\t{camel(ctx.noun(), ctx.field().split("_")[0])}Name = "{ctx.sentence(2, 5).lower()}"')
        lines.append(f"\tmax{pascal(ctx.noun())}s = {ctx.int(1, 5000)}")
        return lines + [")", ""]

    blocks = [("block_func", 6), ("block_struct", 2), ("block_handler", 3), ("block_cache", 1), ("block_constants", 1)]

    def mutex(self, ctx):
        n = ctx.noun()
        return [f"type {n}Registry struct {{", "\tmu    sync.Mutex", "\titems map[string]int", "}", "",
                f"func (r *{n}Registry) Add(name string) {{", "\tr.mu.Lock()", "\tdefer r.mu.Unlock()", "\tr.items[name]++", "}", ""]

    def lockout(self, ctx):
        return ["func (s *Store) RecordFailedLogin(ctx context.Context, userID int64) error {",
                '\tn, err := s.rdb.Incr(ctx, fmt.Sprintf("login:failures:%d", userID)).Result()', "\tif err != nil {", "\t\treturn err", "\t}",
                "\tif n >= 5 {", '\t\treturn s.rdb.Set(ctx, fmt.Sprintf("account:locked:%d", userID), 1, 15*time.Minute).Err()', "\t}",
                "\treturn nil", "}", ""]

    def lock_goredis_setnx_expire(self, ctx, k):
        return t("""
            func (s *Store) «V»«N»Exclusively(ctx context.Context, id int64) (bool, error) {
            	«k» := fmt.Sprintf("lock:«n»:%d", id)
            	ok, err := s.rdb.SetNX(ctx, «k», 1, 0).Result()
            	if err != nil || !ok {
            		return false, err
            	}
            	s.rdb.Expire(ctx, «k», «ttl»*time.Second)
            	defer s.rdb.Del(ctx, «k»)
            	return true, s.«v»«N»(ctx, id)
            }

        """, V=pascal(v := ctx.verb()), v=v, n=(n := ctx.noun()), N=pascal(n), k=k, ttl=ctx.int(10, 120))

    def lock_goredis_setnx_ttl_lua(self, ctx, k):
        return t("""
            var release«N»Script = redis.NewScript(`«lua»`)

            func (s *Store) With«N»Lock(ctx context.Context, id int64, fn func() error) error {
            	«k» := "lock:«n»:" + strconv.FormatInt(id, 10)
            	token := uuid.NewString()
            	ok, err := s.rdb.SetNX(ctx, «k», token, «ttl»*time.Second).Result()
            	if err != nil {
            		return err
            	}
            	if !ok {
            		return ErrLocked
            	}
            	defer release«N»Script.Run(context.WithoutCancel(ctx), s.rdb, []string{«k»}, token)
            	return fn()
            }

        """, n=(n := ctx.noun()), N=pascal(n), k=k, ttl=ctx.int(10, 120), lua=ctx.rng.choice(LUA_RELEASE))

    def lock_redigo_setnx(self, ctx, k):
        return t("""
            func «v»«N»Once(pool *redigo.Pool, id int64) error {
            	conn := pool.Get()
            	defer conn.Close()
            	«k» := fmt.Sprintf("lock:«n»:%d", id)
            	ok, err := redigo.Int(conn.Do("SETNX", «k», 1))
            	if err != nil || ok == 0 {
            		return err
            	}
            	conn.Do("EXPIRE", «k», «ttl»)
            	defer conn.Do("DEL", «k»)
            	return «v»«N»(id)
            }

        """, v=ctx.verb(), n=(n := ctx.noun()), N=pascal(n), k=k, ttl=ctx.int(10, 120))

    def lock_redigo_set_nx_px(self, ctx, k):
        return t("""
            const release«N»Lua = `«lua»`

            func acquire«N»(conn redigo.Conn, «k», token string) (bool, error) {
            	reply, err := redigo.String(conn.Do("SET", «k», token, "NX", "PX", «ttl»))
            	if err == redigo.ErrNil {
            		return false, nil
            	}
            	return reply == "OK", err
            }

            func release«N»(conn redigo.Conn, «k», token string) error {
            	_, err := redigo.NewScript(1, release«N»Lua).Do(conn, «k», token)
            	return err
            }

        """, N=pascal(ctx.noun()), k=k, ttl=ctx.int(5, 60) * 1000, lua=ctx.rng.choice(LUA_RELEASE))

    def lock_goredis_ttl_bare_del(self, ctx, k):
        return t("""
            func (w *Worker) run«N»(ctx context.Context, id string) error {
            	«k» := "«n»-lock:" + id
            	ok, err := w.rdb.SetNX(ctx, «k», w.hostname, «ttl»*time.Second).Result()
            	if err != nil || !ok {
            		return err
            	}
            	defer w.rdb.Del(ctx, «k»)
            	return w.process«N»(ctx, id)
            }

        """, n=(n := ctx.noun()), N=pascal(n), k=k, ttl=ctx.int(30, 600))

    def lock_pg_advisory(self, ctx, k):
        return t("""
            func «v»«N»Singleton(ctx context.Context, db *sql.DB, id int64) (bool, error) {
            	conn, err := db.Conn(ctx)
            	if err != nil {
            		return false, err
            	}
            	defer conn.Close()
            	var locked bool
            	if err := conn.QueryRowContext(ctx, "SELECT pg_try_advisory_lock($1)", id).Scan(&locked); err != nil || !locked {
            		return false, err
            	}
            	defer conn.ExecContext(context.Background(), "SELECT pg_advisory_unlock($1)", id)
            	return true, «v»«N»(ctx, id)
            }

        """, v=ctx.verb(), n=(n := ctx.noun()), N=pascal(n))

    locks = [("goredis_setnx_expire", ["nx-without-expiry", "release-without-owner-check"]),
             ("goredis_setnx_ttl_lua", []),
             ("redigo_setnx", ["nx-without-expiry", "release-without-owner-check"]),
             ("redigo_set_nx_px", []),
             ("goredis_ttl_bare_del", ["release-without-owner-check"]),
             ("pg_advisory", [])]


# ----------------------------------------------------------------------------- JavaScript / TypeScript


class JavaScript:
    ext = ".js"
    key_style = "camel"
    ts = False

    def path(self, rng, svc, ctx):
        sub = rng.choice(["src/routes", "src/services", "src/models", "src/jobs", "src/lib", "src/controllers"])
        return f"{svc}/{sub}/{camel(ctx.domain, rng.choice(['service', 'routes', 'model', 'job', 'util', 'store']))}{ctx.uniq()}{self.ext}"

    def ty(self, s):
        return s if self.ts else ""

    def header(self, ctx):
        rng = ctx.rng
        if self.ts:
            imps = ["import express, { Request, Response, Router } from 'express';", "import Redis from 'ioredis';",
                    "import { randomUUID } from 'crypto';", "import { Pool } from 'pg';", "import { z } from 'zod';",
                    f"import {{ {pascal(ctx.domain)} }} from '../models/{ctx.domain}';", "import { logger } from '../lib/logger';",
                    "import { prisma } from '../lib/prisma';", "import dayjs from 'dayjs';"]
        else:
            imps = ["const express = require('express');", "const Redis = require('ioredis');", "const crypto = require('crypto');",
                    "const { Pool } = require('pg');", f"const {{ {pascal(ctx.domain)} }} = require('../models');",
                    "const logger = require('../lib/logger');", "const { Op } = require('sequelize');", "const dayjs = require('dayjs');"]
        lines = [f"// {ctx.sentence()}.", ""] + sorted(rng.sample(imps, rng.randint(4, len(imps))))
        lines += ["", "const router = express.Router();", "const redis = new Redis(process.env.REDIS_URL);", ""]
        return lines

    def footer(self, ctx):
        return ["module.exports = router;" if not self.ts else "export default router;"]

    def stmts(self, ctx, n, depth=0):
        rng = ctx.rng
        out = []
        for _ in range(n):
            k = rng.randint(0, 8 if depth < 2 else 5)
            a, b, f = ctx.noun(), ctx.noun(), camel(*ctx.field().split("_"))
            if k == 0:
                out.append(f"const {a}{pascal(f)} = {b}?.{f} ?? null;")
            elif k == 1:
                out.append(f"const {a}Names = {b}Items.filter((x) => x.{camel(ctx.adj())}).map((x) => x.{f});")
            elif k == 2:
                out.append(f"logger.info(`{ctx.verb()} {a} ${{{b}Id}}: {ctx.sentence(2, 5).lower()}`);")
            elif k == 3:
                out.append(f"const {a}Key = `{a}:${{{b}Id}}:{f}`;")
            elif k == 4:
                out.append(f"// {ctx.sentence()}")
                out.append(f"total += await {ctx.verb()}{pascal(a)}({b}Id, {{ limit: {ctx.int(10, 200)} }});")
            elif k == 5:
                out.append(f"if (!{a}) {{")
                out.append(f"  throw new Error(`{a} {f} missing for ${{{b}Id}}`);")
                out.append("}")
            elif k == 6:
                out.append(f"for (const {a} of {b}Items) {{")
                out += ind(self.stmts(ctx, rng.randint(1, 3), depth + 1), 2)
                out.append(f"  total += {a}.{rng.choice(['amount', 'count', 'quantity'])};")
                out.append("}")
            elif k == 7:
                out.append("try {")
                out += ind(self.stmts(ctx, rng.randint(1, 3), depth + 1), 2)
                out.append("} catch (err) {")
                out.append(f"  logger.warn(`could not {ctx.verb()} {a}`, err);")
                out.append("  throw err;")
                out.append("}")
            else:
                out.append(f"const {a}Payload = {{ {f}: {b}.{f}, source: '{b}', at: Date.now() }};")
        return out

    def block_function(self, ctx):
        n, o = ctx.noun(), ctx.noun()
        lines = ["/**", f" * {ctx.sentence()}.", " */",
                 f"export async function {camel(ctx.verb(), n, ctx.adj())}({n}Id{self.ty(': number')}, {o}Items{self.ty(': ' + pascal(o) + '[]')} = []){self.ty(': Promise<number>')} {{"
                 if self.ts else f"async function {camel(ctx.verb(), n, ctx.adj())}({n}Id, {o}Items = []) {{",
                 "  let total = 0;"]
        lines += ind(self.stmts(ctx, ctx.rng.randint(3, 10)), 2)
        return lines + ["  return total;", "}", ""]

    def block_class(self, ctx):
        n = ctx.noun()
        cls = pascal(n, ctx.rng.choice(["service", "repository", "client", "manager"]))
        lines = [f"{'export ' if self.ts else ''}class {cls} {{"]
        if self.ts:
            lines += [f"  private readonly {ctx.field().split('_')[0]}Limit = {ctx.int(1, 100)};", "",
                      "  constructor(private readonly db: Pool, private readonly cache: Redis) {}", ""]
        else:
            lines += ["  constructor(db, cache) {", "    this.db = db;", "    this.cache = cache;", "  }", ""]
        for _ in range(ctx.rng.randint(2, 4)):
            m = camel(ctx.verb(), ctx.noun())
            lines += [f"  async {m}({n}Id{self.ty(': number')}, {ctx.noun()}Items{self.ty(': any[]')} = []) {{", "    let total = 0;"]
            lines += ind(self.stmts(ctx, ctx.rng.randint(2, 6)), 4)
            lines += ["    return total;", "  }", ""]
        return lines + ["}", ""]

    def block_handler(self, ctx):
        n, o = ctx.noun(), ctx.noun()
        req = self.ty(": Request")
        res = self.ty(": Response")
        lines = [f"router.{ctx.rng.choice(['get', 'post', 'put', 'delete'])}('/api/v{ctx.rng.randint(1, 3)}/{n}s/:id', async (req{req}, res{res}) => {{",
                 f"  const {n}Id = Number(req.params.id);"]
        if self.ts:
            lines += [f"  const {n} = await prisma.{n}.findUnique({{ where: {{ id: {n}Id }} }});",
                      f"  if (!{n}) return res.status(404).json({{ error: 'not found' }});",
                      f"  const {o}s = await prisma.{o}.findMany({{ where: {{ {n}Id, status: '{ctx.adj()}' }}, orderBy: {{ createdAt: 'desc' }}, take: {ctx.int(10, 100)} }});"]
        else:
            lines += [f"  const {n} = await {pascal(n)}.findByPk({n}Id);",
                      f"  if (!{n}) return res.status(404).json({{ error: 'not found' }});",
                      f"  const {o}s = await {pascal(o)}.findAll({{ where: {{ {n}Id, status: {{ [Op.ne]: '{ctx.adj()}' }} }}, order: [['createdAt', 'DESC']], limit: {ctx.int(10, 100)} }});"]
        lines.append("  let total = 0;")
        lines += ind(self.stmts(ctx, ctx.rng.randint(1, 5)), 2)
        lines += [f"  res.json({{ {n}, {o}s, total }});", "});", ""]
        return lines

    def block_cache(self, ctx):
        n = ctx.noun()
        return [f"{'export ' if self.ts else ''}async function cached{pascal(n)}(id{self.ty(': number')}) {{",
                f"  const key = `{n}:v{ctx.rng.randint(1, 4)}:${{id}}`;", "  const raw = await redis.get(key);",
                "  if (raw) return JSON.parse(raw);", f"  const value = await load{pascal(n)}(id);",
                f"  await redis.set(key, JSON.stringify(value), 'EX', {ctx.rng.choice([60, 300, 900])});", "  return value;", "}", "",
                f"{'export ' if self.ts else ''}async function evict{pascal(n)}(id{self.ty(': number')}) {{",
                f"  await redis.del(`{n}:v1:${{id}}`);", "}", ""]

    def block_constants(self, ctx):
        lines = [f"// {ctx.sentence()}"]
        for _ in range(ctx.rng.randint(3, 8)):
            lines.append(f"{'export ' if self.ts else ''}const {ctx.noun().upper()}_{ctx.field().upper()} = '{ctx.sentence(2, 6).lower()}';")
        lines.append(f"const {ctx.noun().upper()}_LIMITS = {{")
        for _ in range(ctx.rng.randint(2, 5)):
            lines.append(f"  {ctx.noun()}: {ctx.int(1, 10000)},")
        return lines + ["};", ""]

    blocks = [("block_function", 5), ("block_class", 3), ("block_handler", 3), ("block_cache", 1), ("block_constants", 1)]

    def mutex(self, ctx):
        n = ctx.noun()
        return ["// one refresh at a time in this process", f"let {n}Refreshing = null;",
                f"{'export ' if self.ts else ''}function refresh{pascal(n)}Once() {{",
                f"  if (!{n}Refreshing) {{", f"    {n}Refreshing = load{pascal(n)}().finally(() => {{ {n}Refreshing = null; }});", "  }",
                f"  return {n}Refreshing;", "}", ""]

    def lockout(self, ctx):
        return [f"async function recordFailedLogin(userId{self.ty(': number')}) {{", "  const n = await redis.incr(`login:failures:${userId}`);",
                "  if (n >= 5) {", "    await redis.set(`account:locked:${userId}`, '1', 'EX', 900);", "  }", "}", "",
                f"async function clearLockout(userId{self.ty(': number')}) {{", "  await redis.del(`account:locked:${userId}`);", "}", ""]

    def lock_ioredis_setnx_expire(self, ctx, k):
        return t("""
            async function «v»«N»Exclusively(«n»Id«tn») {
              const «k» = `lock:«n»:${«n»Id}`;
              const ok = await redis.setnx(«k», '1');
              if (!ok) return false;
              await redis.expire(«k», «ttl»);
              try {
                await «v»«N»(«n»Id);
              } finally {
                await redis.del(«k»);
              }
              return true;
            }

        """, v=ctx.verb(), n=(n := ctx.noun()), N=pascal(n), k=k, ttl=ctx.int(10, 120), tn=self.ty(": number"))

    def lock_ioredis_set_px_nx_lua(self, ctx, k):
        return t("""
            const RELEASE_«U» = `«lua»`;

            async function with«N»Lock(«n»Id«tn», fn«tf») {
              const «k» = `lock:«n»:${«n»Id}`;
              const token = «uuid»;
              const ok = await redis.set(«k», token, 'PX', «ttl», 'NX');
              if (ok !== 'OK') throw new Error(`«n» ${«n»Id} is locked`);
              try {
                return await fn();
              } finally {
                await redis.eval(RELEASE_«U», 1, «k», token);
              }
            }

        """, n=(n := ctx.noun()), N=pascal(n), U=n.upper(), k=k, ttl=ctx.int(5, 60) * 1000, lua=ctx.rng.choice(LUA_RELEASE),
                 tn=self.ty(": number"), tf=self.ty(": () => Promise<T>"), uuid="randomUUID()" if self.ts else "crypto.randomUUID()")

    def lock_noderedis_nx_no_ttl(self, ctx, k):
        return t("""
            async function run«N»Job(client«tc», jobId«ts») {
              const «k» = 'locks:«n»-job:' + jobId;
              const acquired = await client.set(«k», String(process.pid), { NX: true });
              if (!acquired) return;
              try {
                await «v»«N»s(jobId);
              } finally {
                await client.del(«k»);
              }
            }

        """, v=ctx.verb(), n=(n := ctx.noun()), N=pascal(n), k=k, tc=self.ty(": RedisClientType"), ts=self.ty(": string"))

    def lock_noderedis_px_bare_del(self, ctx, k):
        return t("""
            async function «v»«N»Once(client«tc», «n»Id«ts») {
              const «k» = `«n»_lock_${«n»Id}`;
              if (await client.set(«k», '1', { NX: true, PX: «ttl» })) {
                try {
                  await «v»«N»(«n»Id);
                } finally {
                  await client.del(«k»);
                }
              }
            }

        """, v=ctx.verb(), n=(n := ctx.noun()), N=pascal(n), k=k, ttl=ctx.int(5, 600) * 1000, tc=self.ty(": RedisClientType"), ts=self.ty(": string"))

    def lock_redlock(self, ctx, k):
        return t("""
            async function «v»«N»Guarded(«n»Id«tn») {
              const lock = await redlock.acquire([`locks:«n»:${«n»Id}`], «ttl»);
              try {
                await «v»«N»(«n»Id);
              } finally {
                await lock.release();
              }
            }

        """, v=ctx.verb(), n=(n := ctx.noun()), N=pascal(n), ttl=ctx.int(5, 60) * 1000, tn=self.ty(": number"))

    def lock_pg_advisory(self, ctx, k):
        return t("""
            async function «v»«N»Singleton(pool«tp», «n»Id«tn») {
              const client = await pool.connect();
              try {
                const { rows } = await client.query('SELECT pg_try_advisory_lock($1) AS locked', [«n»Id]);
                if (!rows[0].locked) return false;
                try {
                  await «v»«N»(«n»Id);
                } finally {
                  await client.query('SELECT pg_advisory_unlock($1)', [«n»Id]);
                }
                return true;
              } finally {
                client.release();
              }
            }

        """, v=ctx.verb(), n=(n := ctx.noun()), N=pascal(n), tp=self.ty(": Pool"), tn=self.ty(": number"))

    def lock_ioredis_nx_get_del(self, ctx, k):
        return t("""
            async function acquire«N»(«k»«ts», token«ts») {
              return (await redis.set(«k», token, 'NX')) === 'OK';
            }

            async function release«N»(«k»«ts», token«ts») {
              if ((await redis.get(«k»)) === token) {
                await redis.del(«k»);
              }
            }

        """, N=pascal(ctx.noun()), k=k, ts=self.ty(": string"))

    locks = [("ioredis_setnx_expire", ["nx-without-expiry", "release-without-owner-check"]),
             ("ioredis_set_px_nx_lua", []),
             ("noderedis_nx_no_ttl", ["nx-without-expiry", "release-without-owner-check"]),
             ("noderedis_px_bare_del", ["release-without-owner-check"]),
             ("redlock", []),
             ("pg_advisory", []),
             ("ioredis_nx_get_del", ["nx-without-expiry", "release-without-owner-check"])]


class TypeScript(JavaScript):
    ext = ".ts"
    ts = True


# ----------------------------------------------------------------------------- Rust


class Rust:
    ext = ".rs"
    key_style = "snake"

    def path(self, rng, svc, ctx):
        return f"{svc}/src/{rng.choice(['handlers', 'store', 'jobs', 'domain', 'services'])}/{ctx.domain}_{rng.choice(['handler', 'store', 'job', 'model', 'service'])}{ctx.uniq()}.rs"

    def header(self, ctx):
        rng = ctx.rng
        uses = ["use std::collections::HashMap;", "use std::sync::Arc;", "use std::time::Duration;",
                "use anyhow::{anyhow, Context, Result};", "use axum::{extract::{Path, State}, http::StatusCode, Json};",
                "use redis::AsyncCommands;", "use serde::{Deserialize, Serialize};", "use sqlx::PgPool;",
                "use tracing::{info, warn};", "use uuid::Uuid;", "use chrono::{DateTime, Utc};"]
        return [f"//! {ctx.sentence()}.", ""] + sorted(rng.sample(uses, rng.randint(5, 10))) + [""]

    def footer(self, ctx):
        return []

    def stmts(self, ctx, n, depth=0):
        rng = ctx.rng
        out = []
        for _ in range(n):
            k = rng.randint(0, 8 if depth < 2 else 5)
            a, b, f = ctx.noun(), ctx.noun(), ctx.field()
            if k == 0:
                out.append(f"let {a}_{f} = {b}.{f}.clone();")
            elif k == 1:
                out.append(f"let {a}_names: Vec<_> = {b}_items.iter().filter(|x| x.{ctx.field()}.is_some()).map(|x| x.{f}.clone()).collect();")
            elif k == 2:
                out.append(f'info!({b}_id, "{ctx.verb()} {a}: {ctx.sentence(2, 5).lower()}");')
            elif k == 3:
                out.append(f'let {a}_key = format!("{a}:{{}}:{f}", {b}_id);')
            elif k == 4:
                out.append(f"// {ctx.sentence()}")
                out.append(f"total += {ctx.verb()}_{a}({b}_id, {ctx.int(10, 200)}).await?;")
            elif k == 5:
                out.append(f"if {b}_id == 0 {{")
                out.append(f'    return Err(anyhow!("{ctx.verb()} {a}: invalid {b} id"));')
                out.append("}")
            elif k == 6:
                out.append(f"for {a} in &{b}_items {{")
                out += ind(self.stmts(ctx, rng.randint(1, 3), depth + 1), 4)
                out.append(f"    total += {a}.{rng.choice(['amount', 'count', 'quantity'])};")
                out.append("}")
            elif k == 7:
                out.append(f"match {a}.status.as_str() {{")
                for s in rng.sample(ADJS, 2):
                    out.append(f'    "{s}" => total += {ctx.int(1, 9)},')
                out.append(f'    other => warn!(status = other, "unexpected {a} status"),')
                out.append("}")
            else:
                out.append(f'let {a}_payload = serde_json::json!({{ "{f}": {b}_id, "source": "{b}" }});')
        return out

    def block_fn(self, ctx):
        n, o = ctx.noun(), ctx.noun()
        lines = [f"/// {ctx.sentence()}.", f"pub async fn {ctx.verb()}_{n}_{ctx.adj()}({n}_id: i64, {o}_items: &[{pascal(o)}]) -> Result<i64> {{",
                 "    let mut total = 0i64;"]
        lines += ind(self.stmts(ctx, ctx.rng.randint(3, 10)), 4)
        return lines + ["    Ok(total)", "}", ""]

    def block_struct(self, ctx):
        n = ctx.noun()
        name = pascal(n, ctx.adj())
        lines = ["#[derive(Debug, Clone, Serialize, Deserialize, sqlx::FromRow)]", f"pub struct {name} {{"]
        fs = ctx.rng.sample(FIELDS, ctx.rng.randint(3, 8))
        for f in fs:
            lines.append(f"    pub {f}: {ctx.rng.choice(['i64', 'String', 'Option<String>', 'DateTime<Utc>', 'bool', 'f64'])},")
        lines += ["}", "", f"impl {name} {{", f"    pub fn is_{ctx.adj()}(&self) -> bool {{", f"        self.{fs[0]} != Default::default()", "    }", "}", ""]
        return lines

    def block_handler(self, ctx):
        n, o = ctx.noun(), ctx.noun()
        return [f"pub async fn {ctx.verb()}_{n}(State(app): State<Arc<AppState>>, Path(id): Path<i64>) -> Result<Json<{pascal(n)}View>, StatusCode> {{",
                f"    let {n} = sqlx::query_as::<_, {pascal(n)}>(\"SELECT * FROM {n}s WHERE id = $1 AND status = $2\")",
                "        .bind(id)", f"        .bind(\"{ctx.adj()}\")", "        .fetch_optional(&app.db)", "        .await",
                "        .map_err(|_| StatusCode::INTERNAL_SERVER_ERROR)?", "        .ok_or(StatusCode::NOT_FOUND)?;",
                f"    let {o}s = sqlx::query_as::<_, {pascal(o)}>(\"SELECT * FROM {o}s WHERE {n}_id = $1 ORDER BY created_at DESC LIMIT {ctx.int(10, 100)}\")",
                "        .bind(id)", "        .fetch_all(&app.db)", "        .await", "        .map_err(|_| StatusCode::INTERNAL_SERVER_ERROR)?;",
                f"    Ok(Json({pascal(n)}View {{ {n}, {o}s }}))", "}", ""]

    def block_cache(self, ctx):
        n = ctx.noun()
        return [f"pub async fn cached_{n}(con: &mut redis::aio::MultiplexedConnection, id: i64) -> Result<String> {{",
                f'    let key = format!("{n}:v{ctx.rng.randint(1, 4)}:{{id}}");',
                "    if let Some(raw) = con.get::<_, Option<String>>(&key).await? {", "        return Ok(raw);", "    }",
                f"    let value = load_{n}(id).await?;", f"    let _: () = con.set_ex(&key, &value, {ctx.rng.choice([60, 300, 900])}).await?;",
                "    Ok(value)", "}", "", f"pub async fn evict_{n}(con: &mut redis::aio::MultiplexedConnection, id: i64) -> Result<()> {{",
                f'    let _: () = con.del(format!("{n}:v1:{{id}}")).await?;', "    Ok(())", "}", ""]

    def block_constants(self, ctx):
        lines = [f"// {ctx.sentence()}"]
        for _ in range(ctx.rng.randint(3, 8)):
            lines.append(f'pub const {ctx.noun().upper()}_{ctx.field().upper()}: &str = "{ctx.sentence(2, 6).lower()}";')
        lines.append(f"pub const MAX_{ctx.noun().upper()}S: usize = {ctx.int(1, 5000)};")
        return lines + [""]

    blocks = [("block_fn", 6), ("block_struct", 2), ("block_handler", 2), ("block_cache", 1), ("block_constants", 1)]

    def mutex(self, ctx):
        n = ctx.noun()
        return [f"pub struct {pascal(n)}Registry {{", "    inner: tokio::sync::Mutex<HashMap<String, u64>>,", "}", "",
                f"impl {pascal(n)}Registry {{", "    pub async fn add(&self, name: &str) {", "        let mut g = self.inner.lock().await;",
                "        *g.entry(name.to_owned()).or_default() += 1;", "    }", "}", ""]

    def lockout(self, ctx):
        return ["pub async fn record_failed_login(con: &mut redis::aio::MultiplexedConnection, user_id: i64) -> Result<()> {",
                '    let n: i64 = con.incr(format!("login:failures:{user_id}"), 1).await?;', "    if n >= 5 {",
                '        let _: () = con.set_ex(format!("account:locked:{user_id}"), 1, 900).await?;', "    }", "    Ok(())", "}", ""]

    def lock_setnx_expire(self, ctx, k):
        return t("""
            pub async fn «v»_«n»_exclusively(con: &mut redis::aio::MultiplexedConnection, «n»_id: i64) -> Result<bool> {
                let «k» = format!("lock:«n»:{}", «n»_id);
                let acquired: bool = con.set_nx(&«k», 1).await?;
                if !acquired {
                    return Ok(false);
                }
                let _: () = con.expire(&«k», «ttl»).await?;
                let result = «v»_«n»(«n»_id).await;
                let _: () = con.del(&«k»).await?;
                result.map(|_| true)
            }

        """, v=ctx.verb(), n=ctx.noun(), k=k, ttl=ctx.int(10, 120))

    def lock_cmd_set_nx_px_script(self, ctx, k):
        return t("""
            const RELEASE_«U»: &str = r#"«lua»"#;

            pub async fn with_«n»_lock(con: &mut redis::aio::MultiplexedConnection, «n»_id: i64) -> Result<()> {
                let «k» = format!("lock:«n»:{«n»_id}");
                let token = Uuid::new_v4().to_string();
                let ok: Option<String> = redis::cmd("SET").arg(&«k»).arg(&token).arg("NX").arg("PX").arg(«ttl»).query_async(con).await?;
                if ok.is_none() {
                    return Err(anyhow!("«n» {«n»_id} is locked"));
                }
                let result = process_«n»(«n»_id).await;
                let _: i64 = redis::Script::new(RELEASE_«U»).key(&«k»).arg(&token).invoke_async(con).await?;
                result
            }

        """, n=(n := ctx.noun()), U=n.upper(), k=k, ttl=ctx.int(5, 60) * 1000, lua=ctx.rng.choice(LUA_RELEASE))

    def lock_set_options_bare_del(self, ctx, k):
        return t("""
            pub async fn «v»_«n»_once(con: &mut redis::aio::MultiplexedConnection, «n»_id: i64) -> Result<()> {
                let «k» = format!("«n»_lock_{«n»_id}");
                let opts = redis::SetOptions::default()
                    .conditional_set(redis::ExistenceCheck::NX)
                    .with_expiration(redis::SetExpiry::EX(«ttl»));
                let ok: Option<String> = con.set_options(&«k», std::process::id(), opts).await?;
                if ok.is_some() {
                    let result = «v»_«n»(«n»_id).await;
                    let _: () = con.del(&«k»).await?;
                    result?;
                }
                Ok(())
            }

        """, v=ctx.verb(), n=ctx.noun(), k=k, ttl=ctx.int(30, 600))

    def lock_sqlx_advisory(self, ctx, k):
        return t("""
            pub async fn «v»_«n»_singleton(pool: &PgPool, «n»_id: i64) -> Result<bool> {
                let mut conn = pool.acquire().await?;
                let locked: bool = sqlx::query_scalar("SELECT pg_try_advisory_lock($1)").bind(«n»_id).fetch_one(&mut *conn).await?;
                if !locked {
                    return Ok(false);
                }
                let result = «v»_«n»(«n»_id).await;
                sqlx::query("SELECT pg_advisory_unlock($1)").bind(«n»_id).execute(&mut *conn).await?;
                result.map(|_| true)
            }

        """, v=ctx.verb(), n=ctx.noun())

    locks = [("setnx_expire", ["nx-without-expiry", "release-without-owner-check"]),
             ("cmd_set_nx_px_script", []),
             ("set_options_bare_del", ["release-without-owner-check"]),
             ("sqlx_advisory", [])]


# ----------------------------------------------------------------------------- PHP


class Php:
    ext = ".php"
    key_style = "camel"

    def path(self, rng, svc, ctx):
        self.cls = pascal(ctx.domain, rng.choice(["controller", "service", "repository", "job"])) + str(ctx.uniq())
        self.ns = rng.choice(["Http\\Controllers", "Services", "Repositories", "Jobs"])
        return f"{svc}/app/{self.ns.replace(chr(92), '/')}/{self.cls}.php"

    def header(self, ctx):
        rng = ctx.rng
        uses = ["Illuminate\\Http\\Request", "Illuminate\\Support\\Facades\\DB", "Illuminate\\Support\\Facades\\Cache",
                "Illuminate\\Support\\Facades\\Log", f"App\\Models\\{pascal(ctx.domain)}", f"App\\Models\\{pascal(ctx.others[0])}",
                "Illuminate\\Support\\Str", "Carbon\\Carbon", "Redis"]
        lines = ["<?php", "", "declare(strict_types=1);", "", f"namespace App\\{self.ns};", ""]
        lines += [f"use {u};" for u in sorted(rng.sample(uses, rng.randint(4, 8)))]
        lines += ["", "/**", f" * {ctx.sentence()}.", " */", f"class {self.cls}", "{",
                  "    public function __construct(private \\Redis $redis, private \\PDO $pdo)", "    {", "    }", ""]
        return lines

    def footer(self, ctx):
        return ["}"]

    def stmts(self, ctx, n, depth=0):
        rng = ctx.rng
        out = []
        for _ in range(n):
            k = rng.randint(0, 8 if depth < 2 else 5)
            a, b, f = ctx.noun(), ctx.noun(), ctx.field()
            if k == 0:
                out.append(f"${a}{pascal(*f.split('_'))} = ${b}->{f} ?? null;")
            elif k == 1:
                out.append(f"${a}Names = array_map(fn ($x) => $x->{f}, array_filter(${b}Items, fn ($x) => $x->{ctx.field()}));")
            elif k == 2:
                out.append(f"Log::info('{ctx.verb()} {a}', ['{b}' => ${b}Id, '{f}' => {ctx.int()}]);")
            elif k == 3:
                out.append(f"${a}Key = \"{a}:{{${b}Id}}:{f}\";")
            elif k == 4:
                out.append(f"// {ctx.sentence()}")
                out.append(f"$total += $this->{camel(ctx.verb(), a)}(${b}Id, {ctx.int(10, 200)});")
            elif k == 5:
                out.append(f"if (${a} === null) {{")
                out.append(f"    throw new \\RuntimeException(\"{a} {f} missing for {{${b}Id}}\");")
                out.append("}")
            elif k == 6:
                out.append(f"foreach (${b}Items as ${a}) {{")
                out += ind(self.stmts(ctx, rng.randint(1, 3), depth + 1), 4)
                out.append(f"    $total += ${a}->{rng.choice(['amount', 'count', 'quantity'])};")
                out.append("}")
            elif k == 7:
                out.append("try {")
                out += ind(self.stmts(ctx, rng.randint(1, 3), depth + 1), 4)
                out.append("} catch (\\Throwable $e) {")
                out.append(f"    Log::warning('could not {ctx.verb()} {a}', ['error' => $e->getMessage()]);")
                out.append("    throw $e;")
                out.append("}")
            else:
                out.append(f"${a}Payload = ['{f}' => ${b}->{f}, 'source' => '{b}', 'at' => time()];")
        return out

    def block_method(self, ctx):
        n, o = ctx.noun(), ctx.noun()
        lines = ["    /**", f"     * {ctx.sentence()}.", "     */",
                 f"    public function {camel(ctx.verb(), n, ctx.adj())}(int ${n}Id, array ${o}Items = []): int", "    {", "        $total = 0;"]
        lines += ind(self.stmts(ctx, ctx.rng.randint(3, 10)), 8)
        return lines + ["        return $total;", "    }", ""]

    def block_handler(self, ctx):
        n, o = ctx.noun(), ctx.noun()
        lines = [f"    public function {ctx.rng.choice(['show', 'update', 'store', 'destroy'])}{pascal(n)}(Request $request, int $id)", "    {",
                 f"        ${n} = {pascal(n)}::query()->where('status', '{ctx.adj()}')->findOrFail($id);",
                 f"        ${o}s = {pascal(o)}::where('{n}_id', $id)->orderByDesc('created_at')->limit({ctx.int(10, 100)})->get();",
                 "        $total = 0;"]
        lines += ind(self.stmts(ctx, ctx.rng.randint(1, 5)), 8)
        lines += [f"        return response()->json(['{n}' => ${n}, '{o}s' => ${o}s, 'total' => $total]);", "    }", ""]
        return lines

    def block_cache(self, ctx):
        n = ctx.noun()
        return [f"    public function cached{pascal(n)}(int $id): array", "    {",
                f"        $key = \"{n}:v{ctx.rng.randint(1, 4)}:{{$id}}\";", "        $raw = $this->redis->get($key);",
                "        if ($raw !== false) {", "            return json_decode($raw, true);", "        }",
                f"        $value = $this->load{pascal(n)}($id);",
                f"        $this->redis->setex($key, {ctx.rng.choice([60, 300, 900])}, json_encode($value));", "        return $value;", "    }", "",
                f"    public function evict{pascal(n)}(int $id): void", "    {", f"        $this->redis->del(\"{n}:v1:{{$id}}\");", "    }", ""]

    def block_constants(self, ctx):
        lines = [f"    // {ctx.sentence()}"]
        for _ in range(ctx.rng.randint(3, 8)):
            lines.append(f"    private const {ctx.noun().upper()}_{ctx.field().upper()} = '{ctx.sentence(2, 6).lower()}';")
        return lines + [""]

    blocks = [("block_method", 6), ("block_handler", 3), ("block_cache", 1), ("block_constants", 1)]

    def mutex(self, ctx):
        n = ctx.noun()
        return [f"    public function rotate{pascal(n)}Log(string $path): void", "    {", "        $fp = fopen($path, 'c');",
                "        if (flock($fp, LOCK_EX)) {", "            ftruncate($fp, 0);", "            flock($fp, LOCK_UN);", "        }",
                "        fclose($fp);", "    }", ""]

    def lockout(self, ctx):
        return ["    public function recordFailedLogin(int $userId): void", "    {", "        $n = $this->redis->incr(\"login:failures:{$userId}\");",
                "        if ($n >= 5) {", "            $this->redis->setex(\"account:locked:{$userId}\", 900, '1');", "        }", "    }", "",
                "    public function clearLockout(int $userId): void", "    {", "        $this->redis->del(\"account:locked:{$userId}\");", "    }", ""]

    def lock_setnx_expire(self, ctx, k):
        return t("""
                public function «v»«N»Exclusively(int $«n»Id): bool
                {
                    $«k» = "lock:«n»:{$«n»Id}";
                    if (!$this->redis->setnx($«k», '1')) {
                        return false;
                    }
                    $this->redis->expire($«k», «ttl»);
                    try {
                        $this->«v»«N»($«n»Id);
                    } finally {
                        $this->redis->del($«k»);
                    }
                    return true;
                }

        """, v=ctx.verb(), n=(n := ctx.noun()), N=pascal(n), k=k, ttl=ctx.int(10, 120))

    def lock_set_nx_px_lua(self, ctx, k):
        return t("""
                private const RELEASE_«U» = <<<'LUA'
            «lua»
            LUA;

                public function with«N»Lock(int $«n»Id, callable $fn): mixed
                {
                    $«k» = "lock:«n»:{$«n»Id}";
                    $token = bin2hex(random_bytes(16));
                    if (!$this->redis->set($«k», $token, ['nx', 'px' => «ttl»])) {
                        throw new \\RuntimeException("«n» {$«n»Id} is locked");
                    }
                    try {
                        return $fn();
                    } finally {
                        $this->redis->eval(self::RELEASE_«U», [$«k», $token], 1);
                    }
                }

        """, n=(n := ctx.noun()), N=pascal(n), U=n.upper(), k=k, ttl=ctx.int(5, 60) * 1000, lua=ctx.rng.choice(LUA_RELEASE))

    def lock_laravel_cache_lock(self, ctx, k):
        return t("""
                public function «v»«N»Guarded(int $«n»Id): void
                {
                    Cache::lock("locks:«n»:{$«n»Id}", «ttl»)->block(5, function () use ($«n»Id) {
                        $this->«v»«N»($«n»Id);
                    });
                }

        """, v=ctx.verb(), n=(n := ctx.noun()), N=pascal(n), ttl=ctx.int(10, 120))

    def lock_set_nx_ex_bare_del(self, ctx, k):
        return t("""
                public function «v»«N»Once(int $«n»Id): void
                {
                    $«k» = '«n»_lock_' . $«n»Id;
                    if ($this->redis->set($«k», gethostname(), ['nx', 'ex' => «ttl»])) {
                        try {
                            $this->«v»«N»($«n»Id);
                        } finally {
                            $this->redis->del($«k»);
                        }
                    }
                }

        """, v=ctx.verb(), n=(n := ctx.noun()), N=pascal(n), k=k, ttl=ctx.int(30, 600))

    def lock_pdo_advisory(self, ctx, k):
        return t("""
                public function «v»«N»Singleton(int $«n»Id): bool
                {
                    $stmt = $this->pdo->prepare('SELECT pg_try_advisory_lock(?)');
                    $stmt->execute([$«n»Id]);
                    if (!$stmt->fetchColumn()) {
                        return false;
                    }
                    try {
                        $this->«v»«N»($«n»Id);
                    } finally {
                        $this->pdo->prepare('SELECT pg_advisory_unlock(?)')->execute([$«n»Id]);
                    }
                    return true;
                }

        """, v=ctx.verb(), n=(n := ctx.noun()), N=pascal(n))

    def lock_set_nx_no_ttl(self, ctx, k):
        return t("""
                public function run«N»Job(string $jobId): void
                {
                    $«k» = 'locks:«n»-job:' . $jobId;
                    if (!$this->redis->set($«k», (string) getmypid(), ['nx'])) {
                        return;
                    }
                    try {
                        $this->«v»«N»s($jobId);
                    } finally {
                        $this->redis->del($«k»);
                    }
                }

        """, v=ctx.verb(), n=(n := ctx.noun()), N=pascal(n), k=k)

    locks = [("setnx_expire", ["nx-without-expiry", "release-without-owner-check"]),
             ("set_nx_px_lua", []),
             ("laravel_cache_lock", []),
             ("set_nx_ex_bare_del", ["release-without-owner-check"]),
             ("pdo_advisory", []),
             ("set_nx_no_ttl", ["nx-without-expiry", "release-without-owner-check"])]


# ----------------------------------------------------------------------------- Ruby


class Ruby:
    ext = ".rb"
    key_style = "snake"

    def path(self, rng, svc, ctx):
        return f"{svc}/app/{rng.choice(['models', 'controllers', 'services', 'jobs', 'lib'])}/{ctx.domain}_{rng.choice(['service', 'controller', 'job', 'record', 'helper'])}_{ctx.uniq()}.rb"

    def header(self, ctx):
        self.cls = pascal(ctx.domain, ctx.rng.choice(["service", "controller", "job", "repository"]))
        reqs = ["require 'json'", "require 'redis'", "require 'securerandom'", "require 'logger'", "require 'time'", "require 'set'"]
        return ["# frozen_string_literal: true", ""] + sorted(ctx.rng.sample(reqs, ctx.rng.randint(2, 5))) + [
            "", f"module {pascal(ctx.others[1])}", f"  # {ctx.sentence()}.", f"  class {self.cls}",
            f"    DEFAULT_LIMIT = {ctx.int(10, 100)}", "", "    def initialize(redis: Redis.new, logger: Rails.logger)",
            "      @redis = redis", "      @logger = logger", "    end", ""]

    def footer(self, ctx):
        return ["  end", "end"]

    def stmts(self, ctx, n, depth=0):
        rng = ctx.rng
        out = []
        for _ in range(n):
            k = rng.randint(0, 8 if depth < 2 else 5)
            a, b, f = ctx.noun(), ctx.noun(), ctx.field()
            if k == 0:
                out.append(f"{a}_{f} = {b}&.{f}")
            elif k == 1:
                out.append(f"{a}_names = {b}_items.select(&:{ctx.field()}?).map(&:{f})")
            elif k == 2:
                out.append(f'@logger.info("{ctx.verb()} {a} #{{{b}_id}}: {ctx.sentence(2, 5).lower()}")')
            elif k == 3:
                out.append(f'{a}_key = "{a}:#{{{b}_id}}:{f}"')
            elif k == 4:
                out.append(f"# {ctx.sentence()}")
                out.append(f"total += {ctx.verb()}_{a}({b}_id, limit: {ctx.int(10, 200)})")
            elif k == 5:
                out.append(f'raise ArgumentError, "{a} {f} missing for #{{{b}_id}}" if {a}.nil?')
            elif k == 6:
                out.append(f"{b}_items.each do |{a}|")
                out += ind(self.stmts(ctx, rng.randint(1, 3), depth + 1), 2)
                out.append(f"  total += {a}.{rng.choice(['amount', 'count', 'quantity'])}")
                out.append("end")
            elif k == 7:
                out.append("begin")
                out += ind(self.stmts(ctx, rng.randint(1, 3), depth + 1), 2)
                out.append("rescue StandardError => e")
                out.append(f'  @logger.warn("could not {ctx.verb()} {a}: #{{e.message}}")')
                out.append("  raise")
                out.append("end")
            else:
                out.append(f"{a}_payload = {{ {f}: {b}.{f}, source: '{b}', at: Time.now.to_i }}")
        return out

    def block_method(self, ctx):
        n, o = ctx.noun(), ctx.noun()
        lines = [f"    # {ctx.sentence()}.", f"    def {ctx.verb()}_{n}_{ctx.adj()}({n}_id, {o}_items = [])", "      total = 0"]
        lines += ind(self.stmts(ctx, ctx.rng.randint(3, 10)), 6)
        return lines + ["      total", "    end", ""]

    def block_handler(self, ctx):
        n, o = ctx.noun(), ctx.noun()
        lines = [f"    def {ctx.rng.choice(['show', 'update', 'create', 'destroy'])}_{n}", f"      {n} = {pascal(n)}.where(status: '{ctx.adj()}').find(params[:id])",
                 f"      {o}s = {pascal(o)}.where({n}_id: {n}.id).order(created_at: :desc).limit({ctx.int(10, 100)}).includes(:{ctx.noun()})",
                 "      total = 0"]
        lines += ind(self.stmts(ctx, ctx.rng.randint(1, 5)), 6)
        lines += [f"      render json: {{ {n}: {n}, {o}s: {o}s, total: total }}", "    end", ""]
        return lines

    def block_cache(self, ctx):
        n = ctx.noun()
        return [f"    def cached_{n}(id)", f'      key = "{n}:v{ctx.rng.randint(1, 4)}:#{{id}}"', "      raw = @redis.get(key)",
                "      return JSON.parse(raw) if raw", "", f"      value = load_{n}(id)",
                f"      @redis.set(key, value.to_json, ex: {ctx.rng.choice([60, 300, 900])})", "      value", "    end", "",
                f"    def evict_{n}(id)", f'      @redis.del("{n}:v1:#{{id}}")', "    end", ""]

    def block_constants(self, ctx):
        lines = [f"    # {ctx.sentence()}"]
        for _ in range(ctx.rng.randint(3, 8)):
            lines.append(f"    {ctx.noun().upper()}_{ctx.field().upper()} = '{ctx.sentence(2, 6).lower()}'")
        return lines + [""]

    blocks = [("block_method", 6), ("block_handler", 3), ("block_cache", 1), ("block_constants", 1)]

    def mutex(self, ctx):
        n = ctx.noun()
        return [f"    {n.upper()}_MUTEX = Mutex.new", "", f"    def register_{n}(name)", f"      {n.upper()}_MUTEX.synchronize do",
                f"        (@{n}_counts ||= Hash.new(0))[name] += 1", "      end", "    end", ""]

    def lockout(self, ctx):
        return ["    def record_failed_login(user_id)", '      n = @redis.incr("login:failures:#{user_id}")',
                '      @redis.set("account:locked:#{user_id}", 1, ex: 900) if n >= 5', "    end", "",
                "    def clear_lockout(user_id)", '      @redis.del("account:locked:#{user_id}")', "    end", ""]

    def lock_setnx_expire(self, ctx, k):
        return t("""
                def «v»_«n»_exclusively(«n»_id)
                  «k» = "lock:«n»:#{«n»_id}"
                  return false unless @redis.setnx(«k», 1)

                  @redis.expire(«k», «ttl»)
                  begin
                    «v»_«n»(«n»_id)
                  ensure
                    @redis.del(«k»)
                  end
                  true
                end

        """, v=ctx.verb(), n=ctx.noun(), k=k, ttl=ctx.int(10, 120))

    def lock_set_nx_px_lua(self, ctx, k):
        return t("""
                RELEASE_«U» = <<~LUA
                  «lua»
                LUA

                def with_«n»_lock(«n»_id)
                  «k» = "lock:«n»:#{«n»_id}"
                  token = SecureRandom.hex(16)
                  raise LockedError, "«n» #{«n»_id} is locked" unless @redis.set(«k», token, nx: true, px: «ttl»)

                  begin
                    yield
                  ensure
                    @redis.eval(RELEASE_«U», keys: [«k»], argv: [token])
                  end
                end

        """, n=(n := ctx.noun()), U=n.upper(), k=k, ttl=ctx.int(5, 60) * 1000, lua=ctx.rng.choice(LUA_RELEASE))

    def lock_set_nx_no_ttl(self, ctx, k):
        return t("""
                def run_«n»_job(job_id)
                  «k» = "locks:«n»-job:#{job_id}"
                  return unless @redis.set(«k», Process.pid, nx: true)

                  begin
                    «v»_«n»s(job_id)
                  ensure
                    @redis.del(«k»)
                  end
                end

        """, v=ctx.verb(), n=ctx.noun(), k=k)

    def lock_set_nx_ex_bare_del(self, ctx, k):
        return t("""
                def «v»_«n»_once(«n»_id)
                  «k» = "«n»_lock_#{«n»_id}"
                  return unless @redis.set(«k», Socket.gethostname, nx: true, ex: «ttl»)

                  begin
                    «v»_«n»(«n»_id)
                  ensure
                    @redis.del(«k»)
                  end
                end

        """, v=ctx.verb(), n=ctx.noun(), k=k, ttl=ctx.int(30, 600))

    def lock_ar_advisory(self, ctx, k):
        return t("""
                def «v»_«n»_singleton(«n»_id)
                  conn = ActiveRecord::Base.connection
                  return false unless conn.select_value("SELECT pg_try_advisory_lock(#{Integer(«n»_id)})")

                  begin
                    «v»_«n»(«n»_id)
                  ensure
                    conn.execute("SELECT pg_advisory_unlock(#{Integer(«n»_id)})")
                  end
                  true
                end

        """, v=ctx.verb(), n=ctx.noun())

    locks = [("setnx_expire", ["nx-without-expiry", "release-without-owner-check"]),
             ("set_nx_px_lua", []),
             ("set_nx_no_ttl", ["nx-without-expiry", "release-without-owner-check"]),
             ("set_nx_ex_bare_del", ["release-without-owner-check"]),
             ("ar_advisory", [])]


# The Ruby, PHP lock snippets are written at their class-member indent in the templates,
# which t() dedents: put the indent back.
for _cls, _n in [(Ruby, 4), (Php, 4)]:
    for _name in [n for n in dir(_cls) if n.startswith("lock_")]:
        _f = getattr(_cls, _name)

        def _wrap(self, ctx, k, _f=_f, _n=_n):
            return ind(_f(self, ctx, k), _n)

        setattr(_cls, _name, _wrap)

LANGS = {"python": Python, "java": Java, "go": Go, "javascript": JavaScript, "typescript": TypeScript,
         "rust": Rust, "php": Php, "ruby": Ruby}


def file_size(rng):
    return int(min(800, max(50, rng.lognormvariate(math.log(190), 0.75))))


def gen_file(rng, gen, svc, serial):
    ctx = Ctx(rng, serial)
    path = gen.path(rng, svc, ctx)
    target = file_size(rng)
    planted = []
    extras = []
    other = []
    if rng.random() < MUTEX_FILE_RATE:
        extras.append(gen.mutex(ctx))
        other.append("mutex")
    if rng.random() < LOCKOUT_FILE_RATE:
        extras.append(gen.lockout(ctx))
        other.append("lockout")
    if rng.random() < LOCK_FILE_RATE:
        for _ in range(1 if rng.random() < 0.75 else 2):
            name, rules = rng.choice(gen.locks)
            k = ctx.lock_key_name(gen.key_style)
            extras.append(getattr(gen, "lock_" + name)(ctx, k))
            planted.append({"form": name, "rules": rules, "key_var": k})
    head = gen.header(ctx)
    foot = gen.footer(ctx)
    body = []
    names = [b for b, _ in gen.blocks]
    weights = [w for _, w in gen.blocks]
    used = len(head) + len(foot) + sum(len(e) for e in extras)
    while True:
        blk = getattr(gen, rng.choices(names, weights)[0])(ctx)
        if used + len(blk) > 800 or (used >= target and used >= 50):
            if used >= 50:
                break
            continue
        body.append(blk)
        used += len(blk)
    for e in extras:
        body.insert(rng.randint(0, len(body)), e)
    lines = head + [l for b in body for l in b] + foot
    return path, lines, planted, other


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--lines", type=int, default=1_000_000)
    ap.add_argument("--seed", type=int, default=20240611)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    tree = os.path.join(a.out, "tree")
    if os.path.exists(tree) and os.listdir(tree):
        sys.exit(f"{tree} exists and is not empty")
    os.makedirs(tree, exist_ok=True)
    gens = {k: v() for k, v in LANGS.items()}
    svcs = [f"{n}-{s}" for n, s in zip(rng.sample(NOUNS, 40), rng.choices(["api", "svc", "worker", "core", "gateway"], k=40))]
    done = {l: 0 for l, _ in SHARES}
    files = {l: 0 for l, _ in SHARES}
    total = 0
    manifest = {"seed": a.seed, "target_lines": a.lines, "files": [], "by_language": {}, "expected": {},
                "mutex_files": 0, "lockout_files": 0}
    while total < a.lines:
        # the language furthest below its share goes next
        lang = min(SHARES, key=lambda s: (done[s[0]] / (s[1] * a.lines), s[0]))[0]
        gen = gens[lang]
        path, lines, planted, other = gen_file(rng, gen, rng.choice(svcs), sum(files.values()) + 1)
        full = os.path.join(tree, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w") as f:
            f.write("\n".join(lines) + "\n")
        done[lang] += len(lines)
        files[lang] += 1
        total += len(lines)
        if planted:
            manifest["files"].append({"path": path, "lang": lang, "planted": planted})
        for o in other:
            manifest[o + "_files"] = manifest.get(o + "_files", 0) + 1
    for l, _ in SHARES:
        manifest["by_language"][l] = {"files": files[l], "lines": done[l]}
    exp = {"nx-without-expiry": 0, "release-without-owner-check": 0}
    for f in manifest["files"]:
        for p in f["planted"]:
            for r in p["rules"]:
                exp[r] += 1
    manifest["expected"] = exp
    manifest["total_lines"] = total
    manifest["total_files"] = sum(files.values())
    manifest["lock_files"] = len(manifest["files"])
    with open(os.path.join(a.out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1, sort_keys=True)
    print(json.dumps({k: manifest[k] for k in ["total_lines", "total_files", "lock_files", "mutex_files", "lockout_files", "expected", "by_language"]}))


if __name__ == "__main__":
    main()
