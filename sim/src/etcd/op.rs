//! A request as the Raft log carries it (etcd's `InternalRaftRequest`): the client
//! request a member received, its ID (the receiving member's, so the member whose
//! waiter it is hears the result when it applies the entry), and the client host that
//! sent it (for the world's record). Encoded with prost, the request inside as the
//! gRPC message it arrived as.
//!
//! What every member does with an entry is [`super::Store::apply`]; what the member
//! that proposed it answers is that result ([`Applied`]).

use etcd_client::proto::{
    PbDeleteRequest, PbDeleteResponse, PbLeaseGrantRequest, PbLeaseRevokeRequest, PbPutRequest,
    PbPutResponse, PbRangeRequest, PbRangeResponse, PbResponseHeader, PbTxnRequest, PbTxnResponse,
};

/// One replicated request.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Op {
    /// The request's ID (`InternalRaftRequest.ID`): the proposing member's.
    #[prost(uint64, tag = "1")]
    pub id: u64,
    /// The client host that sent it (empty: the member's own, e.g. its lessor).
    #[prost(string, tag = "2")]
    pub by: String,
    #[prost(oneof = "Request", tags = "3, 4, 5, 6, 7, 8, 9")]
    pub request: Option<Request>,
}

/// The request itself.
#[derive(Clone, PartialEq, prost::Oneof)]
pub enum Request {
    /// A linearizable `Range` (etcd serves one after a `ReadIndex`; the model orders
    /// it through the log, which gives the same answer).
    #[prost(message, tag = "3")]
    Range(PbRangeRequest),
    #[prost(message, tag = "4")]
    Put(PbPutRequest),
    #[prost(message, tag = "5")]
    Delete(PbDeleteRequest),
    #[prost(message, tag = "6")]
    Txn(PbTxnRequest),
    /// `LeaseGrant`, its ID chosen by the proposing member.
    #[prost(message, tag = "7")]
    Grant(PbLeaseGrantRequest),
    #[prost(message, tag = "8")]
    Revoke(PbLeaseRevokeRequest),
    /// The leader's lessor found this lease expired (`revokeExpiredLeases`: a
    /// `LeaseRevoke` the leader proposes itself).
    #[prost(int64, tag = "9")]
    Expire(i64),
}

/// What applying an [`Op`] answered.
#[derive(Debug, Clone)]
pub enum Applied {
    Range(PbRangeResponse),
    Put(PbPutResponse),
    Delete(PbDeleteResponse),
    Txn(PbTxnResponse),
    Grant {
        id: i64,
        ttl: i64,
        header: PbResponseHeader,
    },
    Revoke(PbResponseHeader),
    /// An expiry's revoke, or an op without a request.
    Done,
}

impl Op {
    /// `request` by client host `by`, with ID `id`.
    pub fn new(id: u64, by: &str, request: Request) -> Op {
        Op {
            id,
            by: by.to_string(),
            request: Some(request),
        }
    }

    /// The op as a log entry's data.
    pub fn encode(&self) -> Vec<u8> {
        prost::Message::encode_to_vec(self)
    }

    /// The op in a log entry's data, if it is one.
    pub fn decode(data: &[u8]) -> Option<Op> {
        <Op as prost::Message>::decode(data).ok()
    }
}
