//! The checks that keep the docs and the clients true, in one test binary: every relative
//! link resolves, every shell sample runs in CI or says why not, every client has a test for
//! every shared scenario.

mod client_scenarios;
mod links;
mod shell_samples;
