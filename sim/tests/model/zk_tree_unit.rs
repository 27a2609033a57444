//! `sim::zk::tree`'s own tests (moved from the module): path validation and the
//! parent's Stat after a child's delete.

use lock_impl::zk::proto::ErrorCode;
use sim::zk::tree::{DataTree, Txn, TxnBody, validate_path};

#[test]
fn paths_are_validated_as_path_utils_does() {
    for ok in ["/", "/a", "/a/b", "/a.b", "/..a", "/_c_x-lock-0000000001"] {
        assert_eq!(validate_path(ok), Ok(()), "{ok}");
    }
    for bad in [
        "", "a", "/a/", "//a", "/a//b", "/.", "/a/..", "/a/./b", "/a\0b",
    ] {
        assert_eq!(validate_path(bad), Err(ErrorCode::BAD_ARGUMENTS), "{bad}");
    }
}

#[test]
fn deleting_a_child_moves_pzxid_but_not_cversion() {
    let mut t = DataTree::new();
    let create = |zxid, path: &str, cv| Txn {
        zxid,
        time_ms: 5,
        session_id: 9,
        body: TxnBody::Create {
            path: path.into(),
            data: None,
            ephemeral_owner: 0,
            parent_cversion: cv,
        },
    };
    t.apply(&create(1, "/a", 1));
    t.apply(&create(2, "/a/b", 1));
    let triggers = t.apply(&Txn {
        zxid: 3,
        time_ms: 6,
        session_id: 9,
        body: TxnBody::Delete {
            path: "/a/b".into(),
        },
    });
    let a = t.get("/a").unwrap();
    assert_eq!(a.stat.cversion, 1, "the persisted cversion counts creates");
    let a = a.wire_stat();
    assert_eq!((a.cversion, a.pzxid, a.num_children), (2, 3, 0));
    assert_eq!(triggers.len(), 3);
    assert_eq!(t.last_zxid(), 3);
}
