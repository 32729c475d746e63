//! Integration tests of the benchmark, in one test binary: the `delayq-bench` executable run
//! end to end against real redis-server processes (which must be installed: a missing
//! redis-server fails the tests, it never skips them). Speed is never asserted here.

mod cluster;
