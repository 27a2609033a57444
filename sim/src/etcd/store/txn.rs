//! Txns on a member's store: compares, the branch they pick, its checks and its
//! operations applied in order at one revision (the rules are in the parent module's
//! documentation).

use etcd_client::proto::{
    PbCompare, PbKeyValue, PbRangeResponse, PbResponseOp, PbTargetUnion, PbTxnOpRequest,
    PbTxnOpResponse, PbTxnRequest, PbTxnResponse,
};

use super::{
    DUPLICATE_KEY, DeleteCause, EtcdError, FUTURE_REV, MAX_TXN_OPS, Store, TOO_MANY_OPS, WriteTxn,
};
use std::collections::BTreeSet;

impl Store {
    fn compare(&self, c: &PbCompare, revision: i64) -> bool {
        let kvs = self.range_at(&c.key, &c.range_end, revision);
        if kvs.is_empty() {
            if c.target == 3 {
                // VALUE on a missing key: false, whatever the result asked.
                return false;
            }
            return compare_kv(c, &PbKeyValue::default());
        }
        kvs.iter().all(|kv| compare_kv(c, kv))
    }

    /// Refuses a txn with too many operations or two writes of one key in a branch
    /// (`checkTxnRequest`, `checkIntervals`; ranges of deletes not checked here).
    fn check_txn(&self, t: &PbTxnRequest) -> Result<(), EtcdError> {
        if t.compare.len() > MAX_TXN_OPS
            || t.success.len() > MAX_TXN_OPS
            || t.failure.len() > MAX_TXN_OPS
        {
            return Err(TOO_MANY_OPS);
        }
        for ops in [&t.success, &t.failure] {
            let mut seen = BTreeSet::new();
            for op in ops {
                if let Some(PbTxnOpRequest::RequestPut(p)) = &op.request
                    && !seen.insert(p.key.clone())
                {
                    return Err(DUPLICATE_KEY);
                }
            }
        }
        Ok(())
    }

    fn check_ops(&self, ops: &[etcd_client::proto::PbTxnRequestOp]) -> Result<(), EtcdError> {
        for op in ops {
            match &op.request {
                Some(PbTxnOpRequest::RequestPut(p)) => self.check_put(p)?,
                Some(PbTxnOpRequest::RequestRange(r)) if r.revision > self.revision => {
                    return Err(FUTURE_REV);
                }
                Some(PbTxnOpRequest::RequestTxn(t)) => {
                    self.check_txn(t)?;
                    let branch = if t.compare.iter().all(|c| self.compare(c, self.revision)) {
                        &t.success
                    } else {
                        &t.failure
                    };
                    self.check_ops(branch)?;
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// `Txn`, by client host `by`.
    pub fn txn(&mut self, t: &PbTxnRequest, by: &str) -> Result<PbTxnResponse, EtcdError> {
        self.check_txn(t)?;
        let succeeded = t.compare.iter().all(|c| self.compare(c, self.revision));
        let ops = if succeeded { &t.success } else { &t.failure };
        self.check_ops(ops)?;
        let mut w = self.begin();
        let responses = self.apply_ops(&mut w, ops, by)?;
        self.commit(w);
        Ok(PbTxnResponse {
            header: Some(self.header()),
            succeeded,
            responses,
        })
    }

    fn apply_ops(
        &mut self,
        w: &mut WriteTxn,
        ops: &[etcd_client::proto::PbTxnRequestOp],
        by: &str,
    ) -> Result<Vec<PbResponseOp>, EtcdError> {
        let mut out = Vec::with_capacity(ops.len());
        for op in ops {
            let resp = match &op.request {
                Some(PbTxnOpRequest::RequestRange(r)) => {
                    let (kvs, more, count) = self.range_kvs_in(r, w.current(self))?;
                    PbTxnOpResponse::ResponseRange(PbRangeResponse {
                        header: Some(w.header(self)),
                        kvs,
                        more,
                        count,
                    })
                }
                Some(PbTxnOpRequest::RequestPut(p)) => {
                    let mut resp = self.apply_put(w, p, by);
                    resp.header = Some(w.header(self));
                    PbTxnOpResponse::ResponsePut(resp)
                }
                Some(PbTxnOpRequest::RequestDeleteRange(d)) => {
                    let mut resp = self.apply_delete(w, d, &DeleteCause::Command(by.to_string()));
                    resp.header = Some(w.header(self));
                    PbTxnOpResponse::ResponseDeleteRange(resp)
                }
                Some(PbTxnOpRequest::RequestTxn(t)) => {
                    let rev = w.current(self);
                    let succeeded = t.compare.iter().all(|c| self.compare(c, rev));
                    let branch = if succeeded { &t.success } else { &t.failure };
                    let responses = self.apply_ops(w, branch, by)?;
                    PbTxnOpResponse::ResponseTxn(PbTxnResponse {
                        header: Some(w.header(self)),
                        succeeded,
                        responses,
                    })
                }
                None => continue,
            };
            out.push(PbResponseOp {
                response: Some(resp),
            });
        }
        Ok(out)
    }
}

/// `compareKV`: the compare's result on one key.
fn compare_kv(c: &PbCompare, kv: &PbKeyValue) -> bool {
    use std::cmp::Ordering;
    let ord: Ordering = match (&c.target_union, c.target) {
        (Some(PbTargetUnion::Version(v)), _) => kv.version.cmp(v),
        (Some(PbTargetUnion::CreateRevision(v)), _) => kv.create_revision.cmp(v),
        (Some(PbTargetUnion::ModRevision(v)), _) => kv.mod_revision.cmp(v),
        (Some(PbTargetUnion::Value(v)), _) => kv.value.as_slice().cmp(v.as_slice()),
        (Some(PbTargetUnion::Lease(v)), _) => kv.lease.cmp(v),
        (None, 0) => kv.version.cmp(&0),
        (None, 1) => kv.create_revision.cmp(&0),
        (None, 2) => kv.mod_revision.cmp(&0),
        (None, 3) => kv.value.as_slice().cmp(&[][..]),
        (None, _) => kv.lease.cmp(&0),
    };
    match c.result {
        0 => ord == Ordering::Equal,
        1 => ord == Ordering::Greater,
        2 => ord == Ordering::Less,
        _ => ord != Ordering::Equal,
    }
}
