//! The conformance suite on MySQL/MariaDB: the lease table and `GET_LOCK` session locks.

mod lease {
    use leasehold_testkit::{conformance_suite, mysql_fixture};
    conformance_suite!(mysql_fixture());
}

mod session {
    use leasehold_testkit::{conformance_suite, mysql_session_fixture};
    conformance_suite!(mysql_session_fixture());
}
