//! Every conformance case, one file per area. A case is an async function of an [`Endpoint`]
//! that returns `Passed`, `Skipped(why)` or an error saying what did not conform.

use crate::endpoint::Endpoint;
use crate::runner::CaseInfo;
use std::future::Future;
use std::pin::Pin;

pub mod auth_cases;
pub mod gateway_cases;
pub mod group_cases;
pub mod hostile_cases;
pub mod legacy_cases;
pub mod rdkafka_cases;
pub mod wire_cases;

/// What a case concluded.
#[derive(Debug)]
pub enum Outcome {
    Passed,
    /// Not run, and why: never counted as passed.
    Skipped(String),
}

pub type CaseFuture = Pin<Box<dyn Future<Output = anyhow::Result<Outcome>> + Send>>;

/// One case: a stable name, the rule IDs it checks, and its body.
pub struct Case {
    pub name: &'static str,
    /// The module that declares it (`…::cases::wire_cases`), which names its area.
    pub module: &'static str,
    pub rules: &'static [&'static str],
    pub run: fn(Endpoint) -> CaseFuture,
}

impl Case {
    /// Its area: the case file's name without `_cases` (`wire`, `group`, …).
    pub fn area(&self) -> &'static str {
        area_of(self.module)
    }

    /// What the runner reports of it.
    pub fn info(&self) -> CaseInfo<'static> {
        CaseInfo {
            area: self.area(),
            name: self.name,
            rules: self.rules,
            deviations: &[],
        }
    }
}

/// The area of the case file `module` (a `module_path!()`): `…::wire_cases` is `wire`.
pub fn area_of(module: &str) -> &str {
    let file = module.rsplit("::").next().unwrap_or(module);
    file.strip_suffix("_cases").unwrap_or(file)
}

/// A case that starts its own gateways (gateway and auth cases): listed and reported like the
/// others, run only where the suite holds a backend.
#[derive(Debug, Clone, Copy)]
pub struct ListedCase {
    pub name: &'static str,
    pub rules: &'static [&'static str],
}

/// Declares a `Case` from an `async fn(Endpoint) -> anyhow::Result<Outcome>` and its rule IDs:
/// a list of literals, or a `&'static [&'static str]` that several cases share.
#[macro_export]
macro_rules! case {
    ($f:path, [$($rule:literal),+ $(,)?]) => {
        $crate::case!($f, &[$($rule),+])
    };
    ($f:path, $rules:expr) => {
        $crate::cases::Case {
            name: stringify!($f),
            module: module_path!(),
            rules: $rules,
            run: |endpoint| Box::pin($f(endpoint)),
        }
    };
}

/// Every case of the suite.
pub fn all() -> Vec<Case> {
    let mut cases = Vec::new();
    cases.extend(wire_cases::cases());
    cases.extend(rdkafka_cases::cases());
    cases.extend(group_cases::cases());
    cases.extend(hostile_cases::cases());
    cases.extend(legacy_cases::cases());
    cases
}
