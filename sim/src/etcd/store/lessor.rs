//! The lessor's half of a member's store: leases granted, renewed, revoked and
//! expired (the rules are in the parent module's documentation).

use std::collections::BTreeSet;
use std::time::Duration;

use super::{
    Change, DeleteCause, EtcdError, LEASE_EXISTS, LEASE_NOT_FOUND, LEASE_TTL_TOO_LARGE, Lease,
    MAX_LEASE_TTL, Store,
};

/// A follower's lease expiry (`lessor.forever`).
const FOREVER: Duration = Duration::MAX;

/// How long the primary waits before proposing an expired lease's revoke again
/// (`expiredLeaseRetryInterval`, 3 s), in etcd seconds.
const EXPIRED_LEASE_RETRY: i64 = 3;

impl Store {
    /// A lease ID no lease has, from this member's generator (the member ID's low bits
    /// on top, as `idutil.Generator`'s): the member that receives a `LeaseGrant`
    /// chooses the ID before it proposes the grant.
    pub fn new_lease_id(&mut self) -> i64 {
        loop {
            let id = self.next_lease;
            self.next_lease += 1;
            if !self.leases.contains_key(&id) {
                break id;
            }
        }
    }

    /// `LeaseGrant` at member time `now`, by client host `by`: the lease's ID and TTL.
    pub fn grant(
        &mut self,
        id: i64,
        ttl: i64,
        now: Duration,
        by: &str,
    ) -> Result<(i64, i64), EtcdError> {
        if ttl > MAX_LEASE_TTL {
            return Err(LEASE_TTL_TOO_LARGE);
        }
        let id = if id == 0 { self.new_lease_id() } else { id };
        if self.leases.contains_key(&id) {
            return Err(LEASE_EXISTS);
        }
        let ttl = ttl.max(self.min_ttl);
        let expiry = if self.primary {
            now + self.seconds(ttl)
        } else {
            FOREVER
        };
        self.leases.insert(
            id,
            Lease {
                ttl,
                expiry,
                keys: BTreeSet::new(),
            },
        );
        self.note(Change::Granted {
            lease: id,
            ttl,
            by: by.to_string(),
        });
        Ok((id, ttl))
    }

    /// Revokes `id`, deleting its keys in one revision.
    fn revoke_lease(&mut self, id: i64, cause: DeleteCause) -> Result<(), EtcdError> {
        let lease = self.leases.remove(&id).ok_or(LEASE_NOT_FOUND)?;
        let mut w = self.begin();
        for key in &lease.keys {
            if let Some(kv) = self.at(key, self.revision).cloned() {
                self.delete_key(&mut w, &kv, cause.clone());
            }
        }
        self.commit(w);
        Ok(())
    }

    /// `LeaseRevoke`, by client host `by`.
    pub fn revoke(&mut self, id: i64, by: &str) -> Result<(), EtcdError> {
        self.revoke_lease(id, DeleteCause::Revoked(by.to_string()))
    }

    /// Whether `id` exists and has expired at `now` (not revoked yet).
    pub fn expired(&self, id: i64, now: Duration) -> bool {
        self.leases.get(&id).is_some_and(|l| l.expiry <= now)
    }

    /// `LeaseKeepAlive` for one request at `now`: the TTL the lease has again, or
    /// `None` if there is no such lease (the caller waits out a lease that expired and
    /// is not revoked yet, as the lessor's `Renew` does).
    pub fn renew(&mut self, id: i64, now: Duration) -> Option<i64> {
        let ttl = self.leases.get(&id)?.ttl;
        let expiry = now + self.seconds(ttl);
        self.leases.get_mut(&id)?.expiry = expiry;
        Some(ttl)
    }

    /// `LeaseTimeToLive`: (TTL left in whole seconds, granted TTL, keys), or `None`.
    pub fn time_to_live(&self, id: i64, now: Duration) -> Option<(i64, i64, Vec<Vec<u8>>)> {
        let l = self.leases.get(&id)?;
        let left = (l.expiry.saturating_sub(now).as_nanos() / self.second.as_nanos().max(1)) as i64;
        Some((left, l.ttl, l.keys.iter().cloned().collect()))
    }

    /// The member became the leader and applied its term's first entry
    /// (`lessor.Promote(extend)`, `extend` the election timeout): its lessor is the
    /// primary, and every lease gets its whole TTL again from `now`, plus `extend`.
    pub fn promote(&mut self, now: Duration, extend: Duration) {
        self.primary = true;
        self.revoking.clear();
        let second = self.second;
        for l in self.leases.values_mut() {
            l.expiry = now + extend + second * u32::try_from(l.ttl).unwrap_or(u32::MAX);
        }
    }

    /// The member no longer leads (`lessor.Demote`): its leases wait forever.
    pub fn demote(&mut self) {
        self.primary = false;
        self.revoking.clear();
        for l in self.leases.values_mut() {
            l.expiry = FOREVER;
        }
    }

    /// Whether this member's lessor is the primary.
    pub fn is_primary(&self) -> bool {
        self.primary
    }

    /// Every lease's ID (`LeaseLeases`).
    pub fn lease_ids(&self) -> Vec<i64> {
        self.leases.keys().copied().collect()
    }

    /// The primary lessor's pass (every [`Store::expiry_check`]): the leases expired
    /// at `now` whose revoke it has not proposed in the last three seconds, to propose
    /// now.
    pub fn due(&mut self, now: Duration) -> Vec<i64> {
        if !self.primary {
            return Vec::new();
        }
        let retry = self.seconds(EXPIRED_LEASE_RETRY);
        let due: Vec<i64> = self
            .leases
            .iter()
            .filter(|(id, l)| {
                l.expiry <= now && self.revoking.get(id).is_none_or(|t| now >= *t + retry)
            })
            .map(|(id, _)| *id)
            .collect();
        for id in &due {
            self.revoking.insert(*id, now);
        }
        due
    }

    /// Applies an expired lease's revoke: its keys go in one revision.
    pub fn expire_lease(&mut self, id: i64) {
        self.revoking.remove(&id);
        if self.leases.contains_key(&id) {
            self.note(Change::LeaseExpired { lease: id });
            let _ = self.revoke_lease(id, DeleteCause::Expired);
        }
    }
}
