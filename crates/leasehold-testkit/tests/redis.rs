//! The conformance suite and the process-level scenarios on a private Redis server.

use leasehold_testkit::{conformance_suite, redis_fixture};

conformance_suite!(redis_fixture());
