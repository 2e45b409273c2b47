//! Giving back the bytes of pruned rows (docs/design.md §4.6): a `DELETE` leaves a relation
//! as large as it ever was, so after the pruning has deleted rows the table is vacuumed
//! (`VACUUM`, which returns the emptied tail of the heap to the system) and each B-tree index
//! much larger than its live rows need is rebuilt with `REINDEX INDEX CONCURRENTLY` (a plain
//! vacuum keeps an index's emptied pages allocated for good).
//!
//! Neither statement changes a row, and neither takes a lock that a grant's statements wait
//! for: `VACUUM` holds `SHARE UPDATE EXCLUSIVE` (which `INSERT`/`UPDATE`/`DELETE`/`FOR
//! UPDATE` do not conflict with) and takes the `ACCESS EXCLUSIVE` lock that truncating the
//! heap needs only if it is free at once, giving it up within about 20 ms of another session
//! queueing for the table; `REINDEX CONCURRENTLY` holds only `SHARE UPDATE EXCLUSIVE`
//! throughout (it waits for older transactions, they never wait for it). Both need the
//! table's owner (or a member of its role, a superuser, or on PostgreSQL 17 the `MAINTAIN`
//! privilege): without it nothing is done and [`Skipped::NotPermitted`] says why. One
//! session compacts a table at a time (a session advisory lock in the two-`int4` key space,
//! which the session store's `bigint` keys never meet); a `REINDEX CONCURRENTLY` cut short
//! (timeout, lost connection) leaves an invalid `…_ccnew` index, which the next compaction
//! drops first.

use std::time::Duration;

use tokio_postgres::Client;

/// What one compaction of a table did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Compaction {
    /// The table's total size (heap, TOAST, indexes) before, in bytes.
    pub bytes_before: u64,
    /// The same after.
    pub bytes_after: u64,
    /// Whether `VACUUM` ran.
    pub vacuumed: bool,
    /// The indexes rebuilt with `REINDEX INDEX CONCURRENTLY`, by qualified name.
    pub reindexed: Vec<String>,
    /// Leftovers of an earlier rebuild that was cut short, dropped.
    pub dropped_leftovers: Vec<String>,
    /// Why nothing was done, if nothing was.
    pub skipped: Option<Skipped>,
}

/// Why a compaction did nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Skipped {
    /// The table does not exist (in this connection's `search_path`, if unqualified).
    NoTable,
    /// This role may not vacuum or reindex the table: the message names both roles.
    NotPermitted(String),
    /// Another session is compacting the table now.
    Busy,
}

/// An index is rebuilt when its pages exceed twice what a fresh build of its live rows takes
/// plus this many pages (so an empty store's indexes, one or two pages, are left alone).
const SLACK_PAGES: f64 = 1.0;

/// Whether this role may vacuum and reindex the table `c` of `pg_class`: a member of its
/// owner's role (a superuser is), or, on PostgreSQL 17, holding `MAINTAIN` on it.
const MAY: &str = "(pg_has_role(c.relowner, 'USAGE')
      OR CASE WHEN current_setting('server_version_num')::int >= 170000
              THEN has_table_privilege(c.oid, 'MAINTAIN') ELSE false END)";

fn refusal(table: &str, me: &str, owner: &str) -> String {
    format!(
        "role {me} may not VACUUM or REINDEX {table} (owned by {owner}): its pruned rows' bytes \
         stay allocated for reuse; run the compaction as {owner}, or grant {me} membership in \
         {owner} (PostgreSQL 17: GRANT MAINTAIN)"
    )
}

/// Whether this connection's role may compact `table`: `Ok(None)` when the table does not
/// exist (yet), `Ok(Some(Err(why)))` when it may not (for `leasehold doctor`).
pub(crate) async fn permitted(
    c: &Client,
    table: &str,
) -> Result<Option<std::result::Result<(), String>>, tokio_postgres::Error> {
    let sql = format!(
        "SELECT {MAY}, current_user::text, pg_get_userbyid(c.relowner)::text
         FROM pg_class c WHERE c.oid = to_regclass($1)"
    );
    Ok(c.query_opt(&sql, &[&table])
        .await?
        .map(|r| if r.get(0) { Ok(()) } else { Err(refusal(table, r.get(1), r.get(2))) }))
}

/// Compacts `table` (a name as `to_regclass` reads it: `"schema"."table"`, or unqualified
/// through `search_path`) on `c`, a connection outside any transaction. Each statement is
/// bounded by `bound` on the server (`statement_timeout`, `lock_timeout`, restored after).
/// An error leaves the table as correct as before (nothing here changes a row): at worst an
/// invalid `…_ccnew` index that the next compaction drops.
pub(crate) async fn table(
    c: &Client,
    table: &str,
    bound: Duration,
) -> Result<Compaction, tokio_postgres::Error> {
    let Some(row) = c
        .query_opt(
            &format!(
                "SELECT c.oid, pg_total_relation_size(c.oid)::int8, {MAY},
                        current_user::text, pg_get_userbyid(c.relowner)::text,
                        current_setting('server_version_num')::int >= 120000,
                        hashtext('leasehold:compact'), hashtext(c.oid::text)
                 FROM pg_class c WHERE c.oid = to_regclass($1)"
            ),
            &[&table],
        )
        .await?
    else {
        return Ok(Compaction { skipped: Some(Skipped::NoTable), ..Compaction::default() });
    };
    let oid: u32 = row.get(0);
    let before = row.get::<_, i64>(1) as u64;
    let mut done =
        Compaction { bytes_before: before, bytes_after: before, ..Compaction::default() };
    if !row.get::<_, bool>(2) {
        done.skipped = Some(Skipped::NotPermitted(refusal(table, row.get(3), row.get(4))));
        return Ok(done);
    }
    let concurrently: bool = row.get(5);
    let lock: [i32; 2] = [row.get(6), row.get(7)];
    let got: bool =
        c.query_one("SELECT pg_try_advisory_lock($1, $2)", &[&lock[0], &lock[1]]).await?.get(0);
    if !got {
        done.skipped = Some(Skipped::Busy);
        return Ok(done);
    }
    let saved = c
        .query_one(
            "SELECT current_setting('statement_timeout'), current_setting('lock_timeout')",
            &[],
        )
        .await;
    let out = match saved {
        Ok(saved) => {
            let ms = format!("{}ms", bound.as_millis().max(1));
            let set = "SELECT set_config('statement_timeout', $1, false), \
                       set_config('lock_timeout', $2, false)";
            let out = match c.query_one(set, &[&ms, &ms]).await {
                Ok(_) => work(c, oid, concurrently, &mut done).await,
                Err(e) => Err(e),
            };
            let (st, lt): (String, String) = (saved.get(0), saved.get(1));
            let restored = c.query_one(set, &[&st, &lt]).await;
            out.and(restored.map(|_| ()))
        }
        Err(e) => Err(e),
    };
    let unlocked = c.query_one("SELECT pg_advisory_unlock($1, $2)", &[&lock[0], &lock[1]]).await;
    out?;
    unlocked?;
    Ok(done)
}

/// The compaction proper, with the advisory lock held and the bounds set.
async fn work(
    c: &Client,
    oid: u32,
    concurrently: bool,
    done: &mut Compaction,
) -> Result<(), tokio_postgres::Error> {
    let name: String = c.query_one("SELECT $1::oid::regclass::text", &[&oid]).await?.get(0);
    // Leftovers of a rebuild cut short: invalid, still updated by every write.
    let leftovers = c
        .query(
            "SELECT format('%I.%I', n.nspname, ci.relname)
             FROM pg_index i JOIN pg_class ci ON ci.oid = i.indexrelid
                  JOIN pg_namespace n ON n.oid = ci.relnamespace
             WHERE i.indrelid = $1 AND NOT i.indisvalid AND ci.relname ~ '_cc(new|old)[0-9]*$'",
            &[&oid],
        )
        .await?;
    for l in leftovers {
        let idx: String = l.get(0);
        c.batch_execute(&format!("DROP INDEX CONCURRENTLY IF EXISTS {idx}")).await?;
        done.dropped_leftovers.push(idx);
    }
    // INDEX_CLEANUP ON: a vacuum that finds few dead rows (under 2 % of the pages) skips the
    // indexes and leaves the rows' line pointers behind, and a page holding one is not empty,
    // so the heap's tail would not be given back.
    c.batch_execute(&format!("VACUUM (SKIP_LOCKED, INDEX_CLEANUP ON) {name}")).await?;
    done.vacuumed = true;
    if concurrently {
        // Live rows as the vacuum counted them; what a fresh build of each index needs.
        let indexes = c
            .query(
                "SELECT format('%I.%I', n.nspname, ci.relname), pg_relation_size(ci.oid)::int8,
                        (SELECT string_agg(quote_ident(a.attname), ',' ORDER BY a.attnum)
                         FROM pg_attribute a
                         WHERE a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey)),
                        greatest((SELECT reltuples FROM pg_class WHERE oid = $1), 0)::float8,
                        current_setting('block_size')::float8
                 FROM pg_index i JOIN pg_class ci ON ci.oid = i.indexrelid
                      JOIN pg_namespace n ON n.oid = ci.relnamespace
                      JOIN pg_am am ON am.oid = ci.relam
                 WHERE i.indrelid = $1 AND i.indisvalid AND am.amname = 'btree'
                   AND i.indexprs IS NULL AND 0 <> ALL (i.indkey)",
                &[&oid],
            )
            .await?;
        for ix in indexes {
            let (idx, bytes, cols, live, block): (String, i64, String, f64, f64) =
                (ix.get(0), ix.get(1), ix.get(2), ix.get(3), ix.get(4));
            // An entry's width, sampled from the first live rows: the row of the indexed
            // columns (its 24-byte header stands for the entry's 8-byte header and 4-byte
            // line pointer, so the need is overestimated, never under).
            let width: f64 = c
                .query_one(
                    &format!(
                        "SELECT coalesce(avg(pg_column_size(ROW({cols}))), 0)::float8
                         FROM (SELECT {cols} FROM {name} LIMIT 1000) s"
                    ),
                    &[],
                )
                .await?
                .get(0);
            if bloated(bytes as f64 / block, live, width, block) {
                c.batch_execute(&format!("REINDEX INDEX CONCURRENTLY {idx}")).await?;
                done.reindexed.push(idx);
            }
        }
    }
    done.bytes_after = c
        .query_one("SELECT pg_total_relation_size($1::oid::regclass)::int8", &[&oid])
        .await?
        .get::<_, i64>(0) as u64;
    Ok(())
}

/// Whether an index of `pages` pages is much larger than a fresh build of `live` entries of
/// `width` bytes needs: a build fills leaf pages to 90 % and adds the metapage (and, past one
/// leaf, a root and inner pages: a few per thousand leaves, within the factor of two).
fn bloated(pages: f64, live: f64, width: f64, block: f64) -> bool {
    let needed = 1.0 + (live * width / (0.9 * block)).ceil();
    pages > 2.0 * needed + SLACK_PAGES
}

#[cfg(test)]
mod tests {
    use super::bloated;

    #[test]
    fn an_emptied_index_is_bloated_and_a_fresh_one_is_not() {
        // A million 40-byte entries deleted: thousands of pages left, two needed.
        assert!(bloated(6000.0, 0.0, 0.0, 8192.0));
        // An empty store's index: the metapage (and a leaf); four pages are two too many.
        assert!(!bloated(1.0, 0.0, 0.0, 8192.0));
        assert!(!bloated(3.0, 0.0, 0.0, 8192.0));
        assert!(bloated(4.0, 0.0, 0.0, 8192.0));
        assert!(!bloated(5.0, 1.0, 40.0, 8192.0));
        // A freshly built index of 100,000 live 40-byte entries (~543 pages) is left alone,
        // and so is one at a B-tree's usual 70 % fill.
        assert!(!bloated(543.0, 100_000.0, 40.0, 8192.0));
        assert!(!bloated(700.0, 100_000.0, 40.0, 8192.0));
        // Twice and more what the live rows need: rebuilt.
        assert!(bloated(1200.0, 100_000.0, 40.0, 8192.0));
    }
}
