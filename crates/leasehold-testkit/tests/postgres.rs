//! The conformance suite on PostgreSQL: the lease table and session advisory locks.

mod lease {
    use leasehold_testkit::{conformance_suite, postgres_fixture};
    conformance_suite!(postgres_fixture());
}

mod session {
    use leasehold_testkit::{conformance_suite, postgres_session_fixture};
    conformance_suite!(postgres_session_fixture());
}
