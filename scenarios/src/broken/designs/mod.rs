//! The broken designs, each with a doc comment saying what is wrong, and the small
//! helpers every user's lock writes for itself. Only `lock-impl`'s public API is used.
//!
//! One file per design (`set_slip.rs` holds the four `SET` slips, `redisson_rw_copy.rs`
//! the three read-write edits), over `helpers.rs`.

mod helpers;

mod blind_renewal;
mod check_then_set;
mod constant_owner;
mod getset_timestamp;
mod per_client_token;
mod redisson_rw_copy;
mod release_falls_back_to_del;
mod release_ignores_count;
mod set_slip;
mod shared_reentrant_id;
mod token_before_lock;
mod unknown_as_acquired;
mod validity_from_reply;
mod waiter_ignores_ttl;
mod wall_clock_validity;

pub use blind_renewal::BlindRenewal;
pub use check_then_set::CheckThenSet;
pub use constant_owner::ConstantOwner;
pub use getset_timestamp::GetsetTimestamp;
pub use per_client_token::PerClientToken;
pub use redisson_rw_copy::{RedissonRwCopy, RwEdit};
pub use release_falls_back_to_del::ReleaseFallsBackToDel;
pub use release_ignores_count::ReleaseIgnoresCount;
pub use set_slip::SetSlip;
pub use shared_reentrant_id::SharedReentrantId;
pub use token_before_lock::TokenBeforeLock;
pub use unknown_as_acquired::UnknownAsAcquired;
pub use validity_from_reply::ValidityFromReply;
pub use waiter_ignores_ttl::WaiterIgnoresTtl;
pub use wall_clock_validity::WallClockValidity;
