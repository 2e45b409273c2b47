//! What `run` passes on and records without the secrets in it: the environment variables
//! the command does not get (the store URL and copies of its password), and the command line
//! recorded as holder info, with arguments that look like secrets redacted.

use std::ffi::OsString;

use crate::store;

/// The variables the command does not get: `LEASEHOLD_STORE` (the store URL, password
/// included: the job needs only its grant, and `LEASEHOLD_STORE_ID` names the store with the
/// password redacted), and any other variable whose value carries the store URL or its
/// password. Those others are named on stderr when the command starts ([`note_withheld`]):
/// the job may have counted on them.
pub(super) fn withheld_env(
    raw: &str,
    vars: impl Iterator<Item = (OsString, OsString)>,
) -> Vec<OsString> {
    let secrets = store_secrets(raw);
    let mut out = Vec::new();
    for (name, value) in vars {
        if name == store::ENV_STORE {
            out.push(name);
            continue;
        }
        let v = value.to_string_lossy();
        let carries = (!secrets.is_empty() && v.contains(raw))
            || secrets.iter().any(|pw| {
                v.contains(&format!(":{pw}@"))
                    || v.contains(&format!("password={pw}"))
                    || (pw.chars().count() >= 8 && v.contains(pw.as_str()))
            });
        if carries {
            out.push(name);
        }
    }
    out
}

/// Names the variables withheld beyond `LEASEHOLD_STORE` (which is documented), once the
/// command is about to start.
pub(super) fn note_withheld(withheld: &[OsString]) {
    let named: Vec<_> = withheld
        .iter()
        .filter(|n| *n != store::ENV_STORE)
        .map(|n| n.to_string_lossy().into_owned())
        .collect();
    if !named.is_empty() {
        eprintln!(
            "leasehold: note: not passing {} to the command: it holds the store's password",
            named.join(", ")
        );
    }
}

/// The passwords in a store URL: its userinfo's and a `password=` option's.
fn store_secrets(raw: &str) -> Vec<String> {
    let mut out = Vec::new();
    if let Some((_, rest)) = raw.split_once("://") {
        let authority = &rest[..rest.find(['/', '?']).unwrap_or(rest.len())];
        if let Some((userinfo, _)) = authority.rsplit_once('@')
            && let Some((_, pw)) = userinfo.split_once(':')
            && !pw.is_empty()
        {
            out.push(pw.to_owned());
        }
    }
    if let Some(q) = raw.split_once('?').map(|(_, q)| q) {
        for pair in q.split('&') {
            if let Some(pw) = pair.strip_prefix("password=").filter(|p| !p.is_empty()) {
                out.push(pw.to_owned());
            }
        }
    }
    out
}

/// The command line, for `status` and a busy run's message: quoted as a shell would read
/// it, with whatever looks like a secret redacted ([`redact_words`]); cut by [`HolderInfo`].
pub(super) fn command_line(command: &[OsString]) -> String {
    let args: Vec<String> = command.iter().map(|a| a.to_string_lossy().into_owned()).collect();
    redact_words(&args)
        .into_iter()
        .map(|a| {
            if !a.is_empty()
                && a.chars().all(|c| c.is_ascii_alphanumeric() || "-_./=:,@%+".contains(c))
            {
                a
            } else {
                format!("'{}'", a.replace('\'', r"'\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Whether a flag's or a variable's name says its value is a secret (`--password`,
/// `PGPASSWORD`, `api_key`, `--client-secret`, `token`, `-p` …). Errs towards hiding: a
/// `--key` that names a file, or `-p` as a port, is hidden too.
fn secret_name(name: &str) -> bool {
    let n = name.trim_start_matches('-').to_ascii_lowercase();
    n == "p"
        || ["pass", "pwd", "secret", "token", "key", "auth", "cred", "cookie", "private"]
            .iter()
            .any(|w| n.contains(w))
}

/// The arguments with secrets replaced by `***`, word by word (a `sh -c` script is one
/// argument of many words): values of secret-named `NAME=VALUE` pairs (also inside query
/// strings), the value after a secret-named flag (`--password x`, `-p x`, also in the next
/// argument), `-pVALUE` (mysql's form), URL userinfo (`https://user:***@`, `https://***@`),
/// and what follows `Authorization:`, `Bearer` or `Basic`.
fn redact_words(args: &[String]) -> Vec<String> {
    let mut secret_next = false;
    args.iter()
        .map(|arg| {
            let mut out = String::with_capacity(arg.len());
            let mut rest = arg.as_str();
            while !rest.is_empty() {
                let ws = rest.len() - rest.trim_start().len();
                out.push_str(&rest[..ws]);
                rest = &rest[ws..];
                let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
                let (word, tail) = rest.split_at(end);
                rest = tail;
                if word.is_empty() {
                    continue;
                }
                let bare = word.trim_matches(['\'', '"']).to_ascii_lowercase();
                let is_flag = word.starts_with('-') && word.len() > 1;
                if bare == "bearer" || bare == "basic" {
                    out.push_str(word);
                    secret_next = true;
                    continue;
                }
                if secret_next && !is_flag {
                    secret_next = false;
                    // The quotes and `;` around it are the script's, not the secret.
                    let head = word.len() - word.trim_start_matches(['\'', '"']).len();
                    let tail = word.trim_end_matches(['\'', '"', ';', ')']).len().max(head);
                    out.push_str(&word[..head]);
                    out.push_str("***");
                    out.push_str(&word[tail..]);
                    continue;
                }
                secret_next = false;
                let redacted = redact_word(word);
                // A header whose value is a credential, or a flag naming a secret whose value
                // is the next word.
                secret_next = bare.ends_with("authorization:")
                    || bare.ends_with("cookie:")
                    || (is_flag && !word.contains('=') && secret_name(word));
                out.push_str(&redacted);
            }
            out
        })
        .collect()
}

/// One word: `-pVALUE`, URL userinfo and secret-named `NAME=VALUE` pairs redacted.
fn redact_word(word: &str) -> String {
    if let Some(v) = word.strip_prefix("-p")
        && !v.is_empty()
        && !word.starts_with("--")
    {
        return "-p***".to_owned();
    }
    let mut w = word.to_owned();
    // URL userinfo: everything between `://` and the `@` of the authority.
    let mut from = 0;
    while let Some(i) = w[from..].find("://").map(|i| from + i + 3) {
        let auth_end = w[i..].find(['/', '?', '#', '\'', '"']).map_or(w.len(), |e| i + e);
        if let Some(at) = w[i..auth_end].rfind('@').map(|a| i + a) {
            let shown = match w[i..at].split_once(':') {
                Some((user, _)) => format!("{user}:***"),
                None => "***".to_owned(),
            };
            w.replace_range(i..at, &shown);
            from = i + shown.len() + 1;
        } else {
            from = auth_end.min(w.len());
        }
    }
    // NAME=VALUE, wherever it appears (a flag, a variable, a query string).
    let mut out = String::with_capacity(w.len());
    let mut rest = w.as_str();
    while let Some(eq) = rest.find('=') {
        let (head, after) = (&rest[..eq], &rest[eq + 1..]);
        let name_start = head
            .rfind(|c: char| !(c.is_ascii_alphanumeric() || "_-.".contains(c)))
            .map_or(0, |i| i + 1);
        out.push_str(head);
        out.push('=');
        let value_end = after.find(['&', ';', ',', '\'', '"']).unwrap_or(after.len());
        if secret_name(&head[name_start..]) && value_end > 0 {
            out.push_str("***");
            rest = &after[value_end..];
        } else {
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_job_gets_neither_leasehold_store_nor_a_copy_of_its_password() {
        let vars = |pairs: &[(&str, &str)]| -> Vec<(OsString, OsString)> {
            pairs.iter().map(|(k, v)| (OsString::from(k), OsString::from(v))).collect()
        };
        let raw = "redis://app:s3cretpass@db:6379/0";
        let got = withheld_env(
            raw,
            vars(&[
                ("LEASEHOLD_STORE", raw),
                ("REDIS_URL", raw),
                ("OTHER_URL", "postgres://u:s3cretpass@pg/app"),
                ("PLAIN", "s3cretpass"),
                ("HOME", "/root"),
                ("LEASEHOLD_STORE_FILE", "/etc/leasehold/store.url"),
            ])
            .into_iter(),
        );
        let got: Vec<_> = got.iter().map(|n| n.to_string_lossy().into_owned()).collect();
        assert_eq!(got, ["LEASEHOLD_STORE", "REDIS_URL", "OTHER_URL", "PLAIN"]);
        // A URL without a password withholds only LEASEHOLD_STORE.
        let raw = "sqlite:///var/lib/leasehold/l.db";
        let got = withheld_env(raw, vars(&[("LEASEHOLD_STORE", raw), ("X", raw)]).into_iter());
        assert_eq!(got, [OsString::from("LEASEHOLD_STORE")]);
        assert_eq!(store_secrets("postgres://u@h/db?password=pw1&mode=session"), ["pw1"]);
        assert_eq!(store_secrets("redis://:pw2@h:6379"), ["pw2"]);
    }

    fn line(args: &[&str]) -> String {
        command_line(&args.iter().map(OsString::from).collect::<Vec<_>>())
    }

    #[test]
    fn arguments_that_look_like_secrets_are_redacted() {
        for (args, shown) in [
            (&["mysqldump", "--password=hunter2", "db"][..], "mysqldump '--password=***' db"),
            (&["mysqldump", "-phunter2", "db"], "mysqldump '-p***' db"),
            (&["sshpass", "-p", "hunter2", "ssh", "h"], "sshpass -p '***' ssh h"),
            (&["tool", "--api-key", "k1", "--verbose"], "tool --api-key '***' --verbose"),
            (&["tool", "--client-secret", "s1"], "tool --client-secret '***'"),
            (
                &["env", "PGPASSWORD=pw", "AWS_SECRET_ACCESS_KEY=ak", "x"],
                "env 'PGPASSWORD=***' 'AWS_SECRET_ACCESS_KEY=***' x",
            ),
            (&["curl", "https://api/x?token=t1&page=2"], "curl 'https://api/x?token=***&page=2'"),
            (&["curl", "https://tok3n@github.com/o/r"], "curl 'https://***@github.com/o/r'"),
            (&["git", "clone", "https://u:pw@h/r"], "git clone 'https://u:***@h/r'"),
            (&["curl", "-H", "Authorization: Bearer abc"], "curl -H 'Authorization: Bearer ***'"),
            (&["job", "key=v1", "secret=v2", "name=n"], "job 'key=***' 'secret=***' name=n"),
        ] {
            assert_eq!(line(args), shown, "{args:?}");
        }
        // Inside a script, word by word.
        let l = line(&[
            "sh",
            "-c",
            "mysql -u app --password s3cr3t -e 'select 1'; redis-cli -u redis://:pw9@h",
        ]);
        for secret in ["s3cr3t", "pw9"] {
            assert!(!l.contains(secret), "{l}");
        }
        assert!(l.contains("mysql -u app --password ***"), "{l}");
        let l =
            line(&["sh", "-c", "curl -H \"Authorization: Bearer t0k\" https://h; x --token 't1';"]);
        assert!(l.ends_with(r#"Bearer ***" https://h; x --token '\''***'\'';'"#), "{l}");
        // What is no secret stays.
        assert_eq!(line(&["rsync", "-a", "/src/", "host:/dst/"]), "rsync -a /src/ host:/dst/");
        assert_eq!(line(&["./nightly.sh", "--date=2026-01-01"]), "./nightly.sh --date=2026-01-01");
    }

    #[test]
    fn command_lines_are_quoted_and_passwords_redacted() {
        let c: Vec<OsString> = ["psql", "postgres://u:hunter2@db/app", "-c", "select 1"]
            .iter()
            .map(OsString::from)
            .collect();
        let line = command_line(&c);
        assert!(!line.contains("hunter2"), "{line}");
        assert!(line.ends_with("-c 'select 1'"), "{line}");
    }
}
