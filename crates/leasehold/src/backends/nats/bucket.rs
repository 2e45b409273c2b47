//! Opening a bucket: the grants' bucket or a heartbeat bucket, created on first use as the
//! stream `nats kv add` makes (history 1, the lease's `max_age` for a heartbeat bucket), and
//! refused when one of that name was made with another `max_age`.

use std::time::Duration;

use async_nats::jetstream::{self, kv};

use super::config::{Config, Storage};
use super::request::nats_err;
use crate::{Error, Result};

/// Opens bucket `name`, creating it (history 1, `max_age`, the URL's storage and replicas) if
/// it does not exist. A heartbeat bucket whose `max_age` is not its name's is refused: the
/// server would not expire leases when their holders count on it.
pub(super) async fn open_bucket(
    js: &jetstream::Context,
    cfg: &Config,
    name: &str,
    max_age: Duration,
) -> Result<kv::Store> {
    let store = match js.get_key_value(name).await {
        Ok(s) => s,
        Err(_) => {
            let storage = match cfg.storage {
                Storage::File => jetstream::stream::StorageType::File,
                Storage::Memory => jetstream::stream::StorageType::Memory,
            };
            // The stream `nats kv add` would make (async-nats's create_key_value first asks
            // for account details that NATS 2.9 does not send in the form it expects).
            let create = jetstream::stream::Config {
                name: format!("KV_{name}"),
                description: Some("leasehold grants (docs/design.md, NATS JetStream KV)".into()),
                subjects: vec![format!("$KV.{name}.>")],
                max_messages_per_subject: 1,
                max_age,
                storage,
                num_replicas: cfg.replicas,
                // JetStream refuses a duplicate window longer than max_age.
                duplicate_window: if max_age.is_zero() {
                    Duration::from_secs(120)
                } else {
                    max_age.min(Duration::from_secs(120))
                },
                allow_rollup: true,
                deny_delete: true,
                allow_direct: true,
                discard: jetstream::stream::DiscardPolicy::New,
                ..Default::default()
            };
            match js.create_stream(create).await {
                Ok(_) => js
                    .get_key_value(name)
                    .await
                    .map_err(|e| nats_err(&format!("open bucket {name:?}"), e))?,
                // Another process created it meanwhile.
                Err(e) => js
                    .get_key_value(name)
                    .await
                    .map_err(|_| nats_err(&format!("create bucket {name:?}"), e))?,
            }
        }
    };
    let age = store.stream.cached_info().config.max_age;
    if age != max_age {
        return Err(Error::config(
            format!(
                "NATS bucket {name:?} has max_age {age:?}, leasehold needs {max_age:?}: \
                 it was made by someone else; use another bucket (nats://…/BUCKET)"
            ),
            None,
        ));
    }
    Ok(store)
}
