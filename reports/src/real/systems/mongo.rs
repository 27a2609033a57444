//! MongoDB in a real run: none. Debian has no MongoDB package, so its designs stay
//! model-only, and the runner says so before anything starts.

use lock_impl::Backend;
use sim::world::Workload;

use crate::real::system::{ClientCtx, DepsFuture, RealSystem, StartCtx, Started};

/// Why a MongoDB world is not started.
const NO_PACKAGE: &str = "MongoDB has no Debian package: the mongo-* designs stay model-only";

/// MongoDB.
pub(crate) struct Mongo;

impl RealSystem for Mongo {
    fn backend(&self) -> Backend {
        Backend::MongoDb
    }

    fn refuses_world(&self, _w: &Workload) -> Option<String> {
        Some(NO_PACKAGE.into())
    }

    fn start(&self, _w: &Workload, _ctx: &StartCtx) -> Result<Started, String> {
        Err(NO_PACKAGE.into())
    }

    fn client_deps<'a>(&'a self, _w: &'a Workload, _ctx: ClientCtx<'a>) -> DepsFuture<'a> {
        Box::pin(async { Err(NO_PACKAGE.to_string()) })
    }
}
